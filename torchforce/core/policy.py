"""A policy: the network's embedding followed by one distribution head per action."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from torchforce.core.distributions import build_distribution
from torchforce.core.host_acting import HostPolicy
from torchforce.core.named import NamedModules
from torchforce.core.networks import Network
from torchforce.spec import ActionSpec, expect_dict, unknown_name_error
from torchforce.spec.checks import expect_elements

Params = dict[str, tuple[torch.Tensor, ...]]


def _sum_components(values: torch.Tensor) -> torch.Tensor:
    """Sum everything but the batch dimension: a joint quantity over all elements of an action."""
    return values.reshape(values.shape[0], -1).sum(dim=1)


def _sum_heads(values: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of one tensor per action head (a policy has at least one action), left to right as ``sum``."""
    return functools.reduce(operator.add, values)


class Policy(nn.Module):
    """``network`` followed by a distribution per action (``distributions`` maps action names to specs)."""

    def __init__(
        self, network: Network, actions: dict[str, ActionSpec], distributions: Any = None, path: str = "distributions"
    ) -> None:
        super().__init__()
        specs = {} if distributions is None else expect_dict(distributions, path)
        for name in specs:
            if name not in actions:
                raise unknown_name_error(f"{path}.{name}", "action", name, actions)
        for name, action in actions.items():  # before any head allocates: a clear error instead of the allocator's
            per_element = action.num_values if action.type == "int" else 1
            expect_elements(
                network.output_size * action.size * per_element,
                f"actions.{name}",
                f"the policy head's weights ({network.output_size} network outputs to "
                f"{action.size * per_element} values of action '{name}')",
                hint="Use a smaller last layer, or fewer action values.",
            )
        self.network = network
        self.actions = actions
        self.heads = NamedModules(
            {
                name: build_distribution(action, network.output_size, specs.get(name), path=f"{path}.{name}")
                for name, action in actions.items()
            }
        )
        self._heads = tuple(self.heads.items())  # a plain tuple: acting skips the container's lookups
        # which parameters the policy (and the modules learned with it) has: the agent counts one up whenever it
        # changes them, so that what acting computed is known to be of the current parameters or not (one object
        # for every agent sharing this policy, as hogwild workers do)
        self.version = 1
        # small dense policies act in NumPy on the CPU (on_host); False: always in torch
        self.host_acting = True
        self._host: tuple[int, HostPolicy | None] | None = None  # (the version it was decided at, see on_host)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        return {**state, "_host": None}  # views of this policy's memory: a copy builds its own

    def on_host(self, rows: int = 1) -> HostPolicy | None:
        """The policy as NumPy calls for a batch of ``rows`` states (``core/host_acting.py``), or None where it acts
        in torch: a policy that cannot act on the host, a batch whose products NumPy's BLAS would spread over
        threads (``HostPolicy.takes``), ``host_acting`` False. Decided anew when a parameter or module was replaced
        or mixed precision turned on, and for a policy that acts in torch whenever its parameters changed (one
        that could not act on the host may since have come to it)."""
        if not self.host_acting:
            return None
        if self._host is None or not self._still_holds(*self._host):
            self._host = (self.version, HostPolicy.of(self))
        host = self._host[1]
        return host if host is not None and host.takes(rows) else None

    def _still_holds(self, version: int, host: HostPolicy | None) -> bool:
        """Whether what ``on_host`` decided at ``version`` holds: the host policy still shows the parameters, or
        the policy that could not act on the host has not changed since."""
        if host is None:
            return version == self.version
        return host.current() and self.network.autocast_dtype is None

    def forward(
        self, states: dict[str, torch.Tensor], internals: dict[str, torch.Tensor]
    ) -> tuple[Params, dict[str, torch.Tensor], torch.Tensor]:
        embedding, next_internals = self.network(states, internals)
        params = {name: head(embedding) for name, head in self.heads.items()}
        return params, next_internals, embedding

    def act(
        self, states: dict[str, torch.Tensor], internals: dict[str, torch.Tensor], deterministic: bool
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Actions and next internals: acting's hot path. It calls the network's ``forward_unhooked`` and the
        heads' ``forward`` directly, since ``Module.__call__`` costs a few microseconds each, as much as the math
        of a small MLP on one state; so forward hooks registered on them do not run when acting (they do in
        updates)."""
        actions, next_internals, _, _ = self.act_forward(states, internals, deterministic)
        return actions, next_internals

    def act_forward(
        self, states: dict[str, torch.Tensor], internals: dict[str, torch.Tensor], deterministic: bool
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], Params, torch.Tensor]:
        """``act``, and the distribution parameters and embedding the actions came from."""
        embedding, next_internals = self.network.forward_unhooked(states, internals)
        params = {name: head.forward(embedding) for name, head in self._heads}
        actions = {name: head.sample(params[name], deterministic) for name, head in self._heads}
        return actions, next_internals, params, embedding

    def sample(self, params: Params, deterministic: bool) -> dict[str, torch.Tensor]:
        return {name: head.sample(params[name], deterministic) for name, head in self.heads.items()}

    def log_prob(self, params: Params, actions: dict[str, torch.Tensor]) -> torch.Tensor:
        """log pi(a|s) of the joint action, one value per row."""
        return _sum_heads(
            _sum_components(head.log_prob(params[name], actions[name])) for name, head in self.heads.items()
        )

    def entropy(self, params: Params) -> torch.Tensor:
        return _sum_heads(_sum_components(head.entropy(params[name])) for name, head in self.heads.items())

    def kl_divergence(self, params_a: Params, params_b: Params) -> torch.Tensor:
        return _sum_heads(
            _sum_components(head.kl_divergence(params_a[name], params_b[name])) for name, head in self.heads.items()
        )

    def regularization_loss(self) -> torch.Tensor:
        return self.network.regularization_loss()

    @property
    def has_penalties(self) -> bool:
        return self.network.has_penalties
