"""The optimizer contract, the registry and ``build_optimizer``.

An optimizer owns a list of parameters and turns a loss into an update of them. Every update is expressed as
*deltas* (``parameter_after - parameter_before``), as in TensorForce 0.4, so meta optimizers can clip, rescale,
line-search or ship them elsewhere:

- ``step(loss_fn, batch, reference_fn=None, kl_fn=None)`` applies one update and returns its ``Info``.
- ``compute_deltas(...)`` computes the same update and takes it back (for distributed workers).
- ``apply_deltas(deltas)`` adds deltas to the parameters (for the parameter server's copy).

Two paths. A plain gradient optimizer (adam, rmsprop, ...: ``TorchOptimizer``) takes the loss itself:
``minimize(loss)`` is backward, clip and step, and its ``step(loss_fn, batch)`` is just ``minimize(loss_fn(batch,
None))``. The callback contract exists for the optimizers that must evaluate the loss more than once or on
parameters they move: the meta optimizers (``multi_step``, ``subsampling_step``, ``optimized_step``...), the
natural gradient (TRPO, which also passes ``reference_fn`` and ``kl_fn``) and the evolutionary one. Since any of
them may be configured where an agent expects an optimizer, agents call ``step(loss_fn, batch)``; ``needs_closure``
says whether an optimizer needs it.

Callbacks: ``reference_fn(batch)`` is called once per ``step``, before any update, without gradients (e.g. the old
log-probabilities of PPO); ``loss_fn(batch, reference)`` and ``kl_fn(batch, reference)`` return scalar tensors.
Subclasses implement ``apply_update(objective, batch, reference) -> Update``, which applies an update given an
already computed reference; meta optimizers call it on their inner optimizer.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, overload

import torch
from torch import Tensor

from torchforce.spec import Registry, SpecError, check_kwargs, expect_float
from torchforce.spec.checks import MAX_STEPS
from torchforce.spec.errors import what_it_is

Batch = Mapping[str, Any]
Reference = Any
LossFn = Callable[[Batch, Reference], Tensor]
KLFn = Callable[[Batch, Reference], Tensor]
ReferenceFn = Callable[[Batch], Any]
#: What an update reports (``loss``, ``grad_norm``...): numbers, or 0-dim tensors left where they were computed until
#: someone reads them (a summary writes them). On a GPU reading a tensor back waits for the device, so the training
#: loop itself never reads them.
Info = dict[str, float | Tensor]


class Objective(NamedTuple):
    """What an update minimizes: ``loss_fn(batch, reference)``, and ``kl_fn`` for trust-region steps."""

    loss_fn: LossFn
    kl_fn: KLFn | None = None

    def loss(self, batch: Batch, reference: Reference) -> Tensor:
        value = self.loss_fn(batch, reference)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ValueError(f"loss_fn must return a scalar tensor, got {_describe_tensor(value)}")
        return value.reshape(())

    def kl(self, batch: Batch, reference: Reference) -> Tensor:
        if self.kl_fn is None:
            raise ValueError(
                "this optimizer needs kl_fn(batch, reference), the KL divergence from the reference policy"
            )
        value = self.kl_fn(batch, reference)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ValueError(f"kl_fn must return a scalar tensor, got {_describe_tensor(value)}")
        return value.reshape(())


@dataclass
class Update:
    """One applied update: its deltas, its ``Info`` (at least ``loss``) and, where the optimizer can predict it,
    the loss decrease it expects (used by ``optimized_step``'s line search)."""

    deltas: list[Tensor]
    info: Info = field(default_factory=dict)
    estimated_improvement: float | None = None


class Optimizer:
    """Base class: owns ``parameters`` and applies updates to them; see the module docstring.

    ``needs_kl``: the optimizer calls ``kl_fn``, so only callers that give one can use it (the spec key that makes
    it so is ``kl_key``). ``inner_steps``: how many gradient steps or loss evaluations one ``step`` takes at most
    (nested meta optimizers multiply them), limited to ``MAX_STEPS`` when built.
    """

    needs_kl: bool = False
    kl_key: str = "type"
    needs_closure: bool = True  # evaluates the loss through loss_fn (False: minimize(loss) is enough)

    @property
    def inner_steps(self) -> int:
        return 1

    def __init__(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        self.parameters: list[torch.nn.Parameter] = list(parameters)
        if not self.parameters:
            raise ValueError("an optimizer needs at least one parameter")

    # -- the hook subclasses implement -----------------------------------------------------------------------
    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        """Apply one update with an already computed ``reference`` and return it."""
        raise NotImplementedError

    # -- public API ------------------------------------------------------------------------------------------
    def step(
        self,
        loss_fn: LossFn,
        batch: Batch,
        *,
        reference_fn: ReferenceFn | None = None,
        kl_fn: KLFn | None = None,
    ) -> Info:
        """Apply one update (the reference is computed once, first) and return its info (``loss`` at least)."""
        reference = compute_reference(reference_fn, batch)
        return self.apply_update(Objective(loss_fn, kl_fn), batch, reference).info

    def compute_deltas(
        self,
        loss_fn: LossFn,
        batch: Batch,
        *,
        reference_fn: ReferenceFn | None = None,
        kl_fn: KLFn | None = None,
        keep_state: bool = False,
    ) -> list[Tensor]:
        """The deltas ``step`` would apply, without leaving them applied.

        Afterwards the parameters hold exactly their values from before the call, and their ``.grad`` too. The
        optimizer's own state (Adam moments and step count, RMSProp averages, ... of every nested optimizer) is
        also restored to what it was before the call, unless ``keep_state=True``: then it stays advanced exactly
        as ``step`` would have left it, so ``compute_deltas(keep_state=True)`` followed by ``apply_deltas`` equals
        ``step`` in every respect. A distributed worker whose parameters are then overwritten from the parameter
        server wants ``keep_state=True`` (its moments keep accumulating, as the 2018 ``global_optimizer``'s local
        optimizer did). Torch's global RNG (subsampling, evolutionary perturbations) is not rewound: it advances
        as it would in ``step``.
        """
        before = snapshot(self.parameters)
        state = None if keep_state else copy.deepcopy(self.state_dict())
        try:
            update = self.apply_update(Objective(loss_fn, kl_fn), batch, compute_reference(reference_fn, batch))
            deltas = [delta.detach().clone() for delta in update.deltas]
        finally:
            restore(self.parameters, before)
            if state is not None:
                self.load_state_dict(state)
        return deltas

    def apply_deltas(self, deltas: list[Tensor]) -> None:
        """Add ``deltas`` (one tensor per parameter, same shapes) to the parameters."""
        if len(deltas) != len(self.parameters):
            raise ValueError(f"expected {len(self.parameters)} deltas, one per parameter, got {len(deltas)}")
        for index, (parameter, delta) in enumerate(zip(self.parameters, deltas, strict=True)):
            if tuple(delta.shape) != tuple(parameter.shape):
                raise ValueError(
                    f"delta {index} has shape {tuple(delta.shape)}, parameter has {tuple(parameter.shape)}"
                )
        add_(self.parameters, deltas)

    def at_timestep(self, timestep: int) -> None:
        """Set what follows the model's timestep (a learning-rate schedule) before an update; most have nothing."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (moments, counters); empty for stateless optimizers."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


class MetaOptimizer(Optimizer):
    """An optimizer that wraps another one, built from the nested ``optimizer`` spec (path ``...optimizer``)."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], *, optimizer: Any) -> None:
        super().__init__(parameters)
        self.optimizer: Optimizer = build_optimizer(optimizer, self.parameters, path="optimizer")

    @property
    def inner_steps(self) -> int:
        return inner_steps(self.optimizer)

    def at_timestep(self, timestep: int) -> None:
        self.optimizer.at_timestep(timestep)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


# -- registry ----------------------------------------------------------------------------------------------------

OPTIMIZERS = Registry(
    "optimizer",
    {
        "adadelta": "torchforce.core.optimizers.torch_optimizers:Adadelta",
        "adagrad": "torchforce.core.optimizers.torch_optimizers:Adagrad",
        "adam": "torchforce.core.optimizers.torch_optimizers:Adam",
        "clipped_step": "torchforce.core.optimizers.meta:ClippedStep",
        "evolutionary": "torchforce.core.optimizers.evolutionary:Evolutionary",
        "global_optimizer": "torchforce.core.optimizers.meta:GlobalOptimizer",
        "gradient_descent": "torchforce.core.optimizers.torch_optimizers:GradientDescent",
        "momentum": "torchforce.core.optimizers.torch_optimizers:Momentum",
        "multi_step": "torchforce.core.optimizers.meta:MultiStep",
        "nadam": "torchforce.core.optimizers.torch_optimizers:Nadam",
        "natural_gradient": "torchforce.core.optimizers.natural_gradient:NaturalGradient",
        "optimized_step": "torchforce.core.optimizers.meta:OptimizedStep",
        "rmsprop": "torchforce.core.optimizers.torch_optimizers:RMSProp",
        "subsampling_step": "torchforce.core.optimizers.meta:SubsamplingStep",
    },
    base=Optimizer,
)


def build_optimizer(
    spec: Any, parameters: list[torch.nn.Parameter], *, path: str = "optimizer", without_kl: str | None = None
) -> Optimizer:
    """Build an optimizer over ``parameters`` from a spec.

    ``spec`` is an ``Optimizer`` instance (returned as is), an ``Optimizer`` subclass, a name (``"adam"``), a dict
    ``{"type": name, **kwargs}`` or a user class path (``"package.module:Class"``). Meta optimizers build their
    nested ``optimizer`` spec recursively, under the path ``<path>.optimizer``. ``without_kl`` names a caller that
    gives no ``kl_fn`` (``"the ppo agent"``): an optimizer in the chain that needs one (``natural_gradient``,
    ``optimized_step`` with ``ls_max_kl``) is then a SpecError now rather than a failure at the first update.
    """
    optimizer = _build(spec, parameters, path)
    steps = inner_steps(optimizer)
    if steps > MAX_STEPS:
        raise SpecError(
            path,
            f"one step of this optimizer takes up to {steps} inner steps (num_steps, num_samples and iterations, "
            "multiplied through nested optimizers)",
            expected=f"at most {MAX_STEPS}",
            hint="One update takes at most 10^4 steps, so that it ends in reasonable time: lower num_steps.",
        )
    if without_kl is not None:
        _refuse_kl(optimizer, path, without_kl, typed=isinstance(spec, Mapping))
    return optimizer


def inner_steps(optimizer: Any) -> int:
    """``optimizer.inner_steps``, 1 for an optimizer that does not say."""
    steps = getattr(optimizer, "inner_steps", 1)
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1 else 1


def _refuse_kl(optimizer: Optimizer | None, path: str, caller: str, *, typed: bool) -> None:
    """A SpecError at the first optimizer of the chain (outer to inner) that needs ``kl_fn``."""
    where = path
    while optimizer is not None:
        if optimizer.needs_kl:
            key = f"{where}.{optimizer.kl_key}" if typed or where != path else where
            hint = "Only trpo provides one, and builds its natural-gradient step itself (its learning_rate is the KL "
            if optimizer.kl_key == "type":
                hint += 'bound). Use a gradient optimizer here, e.g. {"type": "adam", "learning_rate": 0.001}.'
            else:
                hint += f"bound). Leave out '{optimizer.kl_key}' here."
            target = f"{type(optimizer).__module__}:{type(optimizer).__qualname__}"
            name = next((name for name, path in OPTIMIZERS.table.items() if path == target), type(optimizer).__name__)
            what = f"optimizer '{name}'" + (f" with {optimizer.kl_key}" if optimizer.kl_key != "type" else "")
            raise SpecError(
                key,
                f"{what} needs the KL divergence of the policy from before the update, and {caller} provides none",
                hint=hint,
            )
        optimizer = optimizer.optimizer if isinstance(optimizer, MetaOptimizer) else None
        where = f"{where}.optimizer"


def _build(spec: Any, parameters: list[torch.nn.Parameter], path: str) -> Optimizer:
    if isinstance(spec, Optimizer):
        return spec
    name, kwargs = (spec, {}) if inspect.isclass(spec) else OPTIMIZERS.split(spec, path)
    type_path = f"{path}.type" if isinstance(spec, Mapping) else path
    if inspect.isclass(name):  # a class, given directly or as {"type": SomeClass, ...} from Python code
        if not issubclass(name, Optimizer):
            raise SpecError(
                type_path, f"class {name.__qualname__} is not an optimizer", expected="an Optimizer subclass"
            )
        target, name = name, name.__name__
    elif name == "synchronization":
        raise SpecError(
            type_path,
            "'synchronization' updates a target network and is not a loss optimizer",
            hint="Use the agent's target_sync_frequency / target_update_weight (built as Synchronization).",
        )
    else:
        target = OPTIMIZERS.get(name, type_path)
    if inspect.isclass(target) and issubclass(target, MetaOptimizer) and kwargs.get("optimizer") is None:
        raise SpecError(
            f"{path}.optimizer",
            f"the meta optimizer '{name}' needs a nested optimizer spec",
            hint='For example {"type": "multi_step", "optimizer": {"type": "adam", "learning_rate": 0.001}}.',
        )
    check_kwargs(target, kwargs, path, provided=("parameters",), what=f"optimizer '{name}'")
    _check_takes_parameters(target, kwargs, type_path, f"optimizer '{name}'")
    try:
        optimizer = target(parameters, **kwargs)
    except SpecError as error:
        raise error.under(path) from None
    if not isinstance(optimizer, Optimizer):
        raise SpecError(
            path,
            "not an optimizer",
            got=what_it_is(optimizer),
            expected="a torchforce Optimizer subclass",
            hint=_torch_optimizer_hint() if isinstance(optimizer, torch.optim.Optimizer) else None,
        )
    return optimizer


def _check_takes_parameters(target: Any, kwargs: dict[str, Any], path: str, what: str) -> None:
    """A (user) optimizer that cannot be called as ``target(parameters, **kwargs)`` is a SpecError."""
    try:
        inspect.signature(target).bind([], **kwargs)
    except ValueError:  # no signature to read: the call itself will tell
        return
    except TypeError as error:
        raise SpecError(
            path,
            f"{what} cannot be built here: it cannot be called with the parameters ({error})",
            hint="torchforce passes the list of parameters as the first argument to every optimizer.",
        ) from None


def _torch_optimizer_hint() -> str:
    names = [name for name, target in OPTIMIZERS.table.items() if ".torch_optimizers:" in target]
    return (
        "A torch.optim optimizer cannot be used as it is; torchforce wraps these by name: "
        + ", ".join(sorted(names))
        + ' (e.g. {"type": "adam", "learning_rate": 0.001}).'
    )


# -- helpers shared by the optimizers ---------------------------------------------------------------------------


def compute_reference(reference_fn: ReferenceFn | None, batch: Batch) -> Reference:
    """``reference_fn(batch)`` without gradients, detached (None without a reference_fn)."""
    if reference_fn is None:
        return None
    with torch.no_grad():
        return detach(reference_fn(batch))


def detach(value: Any) -> Any:
    """Detach every tensor in a tensor, dict, list or tuple."""
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, Mapping):
        return {key: detach(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(detach(item) for item in value)
    return value


def snapshot(parameters: list[torch.nn.Parameter]) -> list[Tensor]:
    return [parameter.detach().clone() for parameter in parameters]


@torch.no_grad()
def restore(parameters: list[torch.nn.Parameter], values: list[Tensor]) -> None:
    for parameter, value in zip(parameters, values, strict=True):
        parameter.copy_(value)


@torch.no_grad()
def add_(parameters: list[torch.nn.Parameter], deltas: list[Tensor], scale: float = 1.0) -> None:
    for parameter, delta in zip(parameters, deltas, strict=True):
        parameter.add_(delta.to(parameter.device, parameter.dtype), alpha=scale)


def differences(parameters: list[torch.nn.Parameter], before: list[Tensor]) -> list[Tensor]:
    """``parameter - before`` for each parameter (the deltas of what was applied since ``before``)."""
    return [parameter.detach() - value for parameter, value in zip(parameters, before, strict=True)]


@overload
def gradients(
    value: Tensor | Sequence[Tensor],
    parameters: list[torch.nn.Parameter],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    fill_zeros: Literal[True] = True,
    name: str = "the loss",
) -> list[Tensor]: ...
@overload
def gradients(
    value: Tensor | Sequence[Tensor],
    parameters: list[torch.nn.Parameter],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    fill_zeros: bool,
    name: str = "the loss",
) -> list[Tensor | None]: ...
def gradients(
    value: Tensor | Sequence[Tensor],
    parameters: list[torch.nn.Parameter],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    fill_zeros: bool = True,
    name: str = "the loss",
) -> list[Tensor] | list[Tensor | None]:
    """d value / d parameter for each parameter; for parameters the value does not depend on (or that do not
    require grad) zeros, or None with ``fill_zeros=False`` (what ``loss.backward()`` would leave in ``.grad``).
    Several values: the gradient of their sum, in one backward pass."""
    values = [value] if isinstance(value, Tensor) else list(value)
    trainable = [parameter for parameter in parameters if parameter.requires_grad]
    if not all(value.requires_grad for value in values) or not trainable:
        raise ValueError(f"{name} does not depend on the optimized parameters (it does not require grad)")
    grads = iter(
        torch.autograd.grad(values, trainable, allow_unused=True, create_graph=create_graph, retain_graph=retain_graph)
    )
    result = []
    for parameter in parameters:
        grad = next(grads) if parameter.requires_grad else None
        result.append(torch.zeros_like(parameter) if grad is None and fill_zeros else grad)
    return result


def expect_positive(value: Any, path: str) -> float:
    """A number > 0 (learning rates, clipping values)."""
    number = expect_float(value, path)
    if number <= 0.0:
        raise SpecError(path, "out of range", got=value, expected="a number > 0")
    return number


def expect_fraction(value: Any, path: str, *, include_zero: bool = True, include_one: bool = True) -> float:
    """A number in [0, 1], with the ends excluded as asked."""
    number = expect_float(value, path)
    low_ok = number > 0.0 or (include_zero and number == 0.0)
    high_ok = number < 1.0 or (include_one and number == 1.0)
    if not (low_ok and high_ok):
        interval = ("[" if include_zero else "(") + "0, 1" + ("]" if include_one else ")")
        raise SpecError(path, "out of range", got=value, expected=f"a number in {interval}")
    return number


def _describe_tensor(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return type(value).__name__
