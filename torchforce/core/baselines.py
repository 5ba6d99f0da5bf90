"""State-value baselines for policy-gradient agents (docs/tensorforce-0.4.md, Baselines): mlp, cnn, custom and
aggregated.

``baseline_mode`` "states" feeds the baseline the (preprocessed) states; "network" feeds it the policy network's
embedding with gradients stopped, so the baseline never changes the policy (PPO's ``value_loss_weight`` keeps them:
``shared_state_values``). ``build_pg_baseline`` builds an agent's
mode, baseline module and optimizer from its options; ``state_values`` computes V(s) in either mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch
from torch import nn

from torchforce.core.named import NamedModules
from torchforce.core.networks import build_network
from torchforce.core.networks.layers import init_weight
from torchforce.core.networks.network import has_penalties
from torchforce.spec import Registry, SpecError, StateSpec, expect_choice, expect_dict, expect_int, unknown_name_error

if TYPE_CHECKING:
    from torchforce.core.optimizers import Optimizer
    from torchforce.core.policy import Policy

EMBEDDING = "embedding"
DEFAULT_BASELINE_OPTIMIZER = {"type": "adam", "learning_rate": 1e-3}


@runtime_checkable
class Regularized(Protocol):
    """A baseline's weight penalties: ``Baseline`` and ``Aggregated`` have them, as must a user's baseline module."""

    def regularization_loss(self) -> torch.Tensor: ...


def regularization_loss(baseline: nn.Module) -> torch.Tensor:
    """The weight penalties of ``baseline`` (a module of the baseline registry), added to its loss."""
    if not isinstance(baseline, Regularized):
        raise TypeError(f"the baseline {type(baseline).__name__} has no regularization_loss() method")
    return baseline.regularization_loss()


class Baseline(nn.Module):
    """A network over some states followed by a linear value head: ``forward(states) -> values [B]``.
    ``value_weights`` (ours) initializes the head as a layer's ``weights`` does; null keeps torch's default."""

    def __init__(self, *, states: dict[str, StateSpec], network: Any, value_weights: Any = None) -> None:
        super().__init__()
        self.network = build_network(network, states, path="network")
        self.value = nn.Linear(self.network.output_size, 1)
        if value_weights is not None:
            init_weight(self.value.weight, value_weights, "value_weights")

    def forward(self, states: dict[str, torch.Tensor]) -> torch.Tensor:
        embedding, _ = self.network(states, {})
        return self.value(embedding).squeeze(-1)

    def regularization_loss(self) -> torch.Tensor:
        return self.network.regularization_loss()

    @property
    def has_penalties(self) -> bool:
        return self.network.has_penalties


def _sizes(sizes: Any, path: str) -> list[int]:
    """A list of layer sizes, each an integer >= 1."""
    if not isinstance(sizes, (list, tuple)):
        raise SpecError(path, "not a list of layer sizes", got=sizes, expected="a list like [32, 32]")
    return [expect_int(size, f"{path}[{i}]", minimum=1) for i, size in enumerate(sizes)]


def mlp(*, states: dict[str, StateSpec], sizes: list[int], value_weights: Any = None) -> Baseline:
    layers = [{"type": "dense", "size": size} for size in _sizes(sizes, "sizes")]
    return Baseline(states=states, network=layers, value_weights=value_weights)


def cnn(
    *, states: dict[str, StateSpec], conv_sizes: list[int], dense_sizes: list[int], value_weights: Any = None
) -> Baseline:
    layers: list[dict[str, Any]] = [
        {"type": "conv2d", "size": size, "window": 5 if i == 0 else 3}
        for i, size in enumerate(_sizes(conv_sizes, "conv_sizes"))
    ]
    layers.append({"type": "flatten"})
    layers += [{"type": "dense", "size": size} for size in _sizes(dense_sizes, "dense_sizes")]
    return Baseline(states=states, network=layers, value_weights=value_weights)


def custom(*, states: dict[str, StateSpec], network: Any, value_weights: Any = None) -> Baseline:
    return Baseline(states=states, network=network, value_weights=value_weights)


class Aggregated(nn.Module):
    """One baseline per state, combined by a linear layer."""

    def __init__(self, *, states: dict[str, StateSpec], baselines: dict[str, Any]) -> None:
        super().__init__()
        baselines = expect_dict(baselines, "baselines")
        if not baselines:
            raise SpecError(
                "baselines",
                "needs a baseline for at least one state",
                got=baselines,
                expected=f"a dict keyed by state names ({', '.join(states)})",
            )
        for name in baselines:
            if name not in states:
                raise unknown_name_error(f"baselines.{name}", "state", name, states)
        self.parts = NamedModules(
            {
                name: build_baseline(spec, {name: states[name]}, path=f"baselines.{name}")
                for name, spec in baselines.items()
            }
        )
        self.combine = nn.Linear(len(self.parts), 1)

    def forward(self, states: dict[str, torch.Tensor]) -> torch.Tensor:
        values = torch.stack([part({name: states[name]}) for name, part in self.parts.items()], dim=-1)
        return self.combine(values).squeeze(-1)

    def regularization_loss(self) -> torch.Tensor:
        first, *rest = [regularization_loss(part) for part in self.parts.values()]  # at least one part
        return sum(rest, first)

    @property
    def has_penalties(self) -> bool:
        return any(has_penalties(part) for part in self.parts.values())


BASELINES = Registry(
    "baseline",
    {
        "mlp": "torchforce.core.baselines:mlp",
        "cnn": "torchforce.core.baselines:cnn",
        "custom": "torchforce.core.baselines:custom",
        "aggregated": "torchforce.core.baselines:Aggregated",
        "network": "torchforce.core.baselines:custom",
    },
    base=nn.Module,
)


def build_baseline(spec: Any, states: dict[str, StateSpec], *, path: str = "baseline") -> nn.Module:
    """A baseline from its spec; a dict keyed only by state names is the aggregated form, as in 2018."""
    if isinstance(spec, dict) and spec and "type" not in spec and all(name in states for name in spec):
        spec = {"type": "aggregated", "baselines": spec}
    if isinstance(spec, list):
        spec = {"type": "custom", "network": spec}
    if spec is None:
        raise SpecError(
            path, "a baseline_mode needs a baseline spec", hint='For example {"type": "mlp", "sizes": [64, 64]}.'
        )
    return BASELINES.create(spec, path, base=nn.Module, states=states)


def embedding_states(size: int) -> dict[str, StateSpec]:
    """The states a "network"-mode baseline sees: the policy embedding."""
    return {EMBEDDING: StateSpec(EMBEDDING, (size,), "float")}


def build_pg_baseline(
    mode: Any,
    spec: Any,
    optimizer: Any,
    gae_lambda: Any,
    *,
    states: dict[str, StateSpec],
    embedding_size: int,
    device: torch.device,
) -> tuple[str | None, nn.Module | None, Optimizer | None]:
    """A policy-gradient agent's ``baseline_mode``, ``baseline`` and ``baseline_optimizer`` (docs/tensorforce-0.4.md,
    Baselines):
    ``(mode, baseline module, its optimizer)``, or ``(None, None, None)`` without a mode. The baseline sees the
    (preprocessed) ``states``, or the policy network's embedding in "network" mode. Without a mode, giving a
    baseline, its optimizer or ``gae_lambda`` is an error: none of them would do anything."""
    from torchforce.core.optimizers import build_optimizer

    if mode is None:
        given = [
            key
            for key, value in (("baseline", spec), ("baseline_optimizer", optimizer), ("gae_lambda", gae_lambda))
            if value is not None
        ]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise SpecError(
                "baseline_mode",
                f"{' and '.join(given)} {verb} a baseline_mode",
                got=None,
                expected='"states" or "network"',
            )
        return None, None, None
    mode = expect_choice(mode, "baseline_mode", ("states", "network"))
    inputs = states if mode == "states" else embedding_states(embedding_size)
    baseline = build_baseline(spec, inputs, path="baseline").to(device)
    baseline_optimizer = build_optimizer(
        optimizer or DEFAULT_BASELINE_OPTIMIZER,
        list(baseline.parameters()),
        path="baseline_optimizer",
        without_kl="the baseline",
    )
    return mode, baseline, baseline_optimizer


def state_values(
    baseline: nn.Module,
    mode: str,
    policy: Policy,
    states: dict[str, torch.Tensor],
    internals: dict[str, torch.Tensor],
) -> torch.Tensor:
    """V(s) [B] of a policy-gradient ``baseline``: on the ``states`` ("states" mode), or ("network" mode) on the
    ``policy`` network's embedding of them, detached so that the baseline's loss never moves the policy."""
    if mode == "network":
        embedding, _ = policy.network(states, internals)
        return baseline({EMBEDDING: embedding.detach()})
    return baseline(states)


def shared_state_values(
    baseline: nn.Module, mode: str, states: dict[str, torch.Tensor], embedding: torch.Tensor
) -> torch.Tensor:
    """V(s) [B] from the policy network's ``embedding`` of ``states`` already at hand ("network" mode), or from the
    states. Its gradients are kept: under PPO's ``value_loss_weight`` the value loss trains the network too."""
    return baseline({EMBEDDING: embedding}) if mode == "network" else baseline(states)
