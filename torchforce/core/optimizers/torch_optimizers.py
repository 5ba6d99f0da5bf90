"""Gradient optimizers under their 2018 TensorForce names and keyword names, backed by ``torch.optim``.

TensorForce 0.4 passed these kwargs to ``tf.train.XOptimizer``; here they map onto the torch optimizer with the
same meaning (``beta1, beta2 -> betas``, ``epsilon -> eps``, ``decay -> alpha``, ``use_nesterov -> nesterov``).
The update rules are torch's, which differ from TF 1.x in small details: Adam and RMSProp add epsilon outside
the square root and after bias correction, RMSProp's mean square starts at 0 (TF: 1), and NAdam uses torch's
momentum-decay schedule. Every wrapper also takes ``clip_grad_norm``: the global gradient norm is clipped to it
before the step (not in 2018; modern practice), and a ``learning_rate`` that may be a schedule (ours:
``{"type": "linear", "initial": 2.5e-4, "final": 0, "timesteps": 500000}``, ``torchforce.core.schedules``) set
from the model's timestep before each update (``Agent.model_timestep``: the agent's acts, or those of all the
workers sharing the model). Info: ``loss`` (before the step) and ``grad_norm`` (before clipping), as tensors (see
``Info``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from torchforce.core.optimizers.base import (
    Batch,
    Info,
    Objective,
    Optimizer,
    Reference,
    Update,
    compute_reference,
    differences,
    expect_fraction,
    expect_positive,
    gradients,
    snapshot,
)
from torchforce.core.schedules import Schedule, build_schedule
from torchforce.spec import SpecError, expect_bool, expect_float


def _unshared(grads: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """``grads`` with a copy of each tensor that an earlier parameter's gradient already is: autograd may hand one
    tensor to several parameters (the terms of a sum; torch's fused LSTM backward for both biases), and clipping
    scales the gradients in place, which would scale a shared one once per parameter."""
    seen: set[int] = set()
    unshared = []
    for grad in grads:
        if grad is not None:
            if grad.data_ptr() in seen:
                grad = grad.clone()
            seen.add(grad.data_ptr())
        unshared.append(grad)
    return unshared


class TorchOptimizer(Optimizer):
    """One ``torch.optim`` optimizer stepping on the gradient of the loss: ``minimize(loss)``."""

    needs_closure = False

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        torch_optimizer: type[torch.optim.Optimizer],
        learning_rate: float | dict,
        clip_grad_norm: float | None = None,
        **hyperparameters: Any,
    ) -> None:
        super().__init__(parameters)
        self.schedule = learning_rate_schedule(learning_rate)
        self.clip_grad_norm = None if clip_grad_norm is None else expect_positive(clip_grad_norm, "clip_grad_norm")
        if hyperparameters.get("fused") and not all(_fusable(parameter) for parameter in self.parameters):
            hyperparameters["fused"] = None
        hyperparameters["lr"] = self.schedule.value(0)
        self.torch_optimizer = torch_optimizer(self.parameters, **hyperparameters)

    def at_timestep(self, timestep: int) -> None:
        """The learning rate of the schedule at ``timestep``, for the steps until the next call."""
        if not self.schedule.constant:
            for group in self.torch_optimizer.param_groups:
                group["lr"] = self.schedule.value(timestep)

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        before = snapshot(self.parameters)
        info = self.minimize(objective.loss(batch, reference))
        return Update(differences(self.parameters, before), info)

    def step(
        self,
        loss_fn: Any,
        batch: Batch,
        *,
        reference_fn: Any = None,
        kl_fn: Any = None,
    ) -> Info:
        """``minimize(loss_fn(batch, reference))``: the loss is evaluated once (``kl_fn`` is not needed)."""
        return self.minimize(loss_fn(batch, compute_reference(reference_fn, batch)))

    def minimize(self, loss: torch.Tensor) -> Info:
        """One step down the gradient of ``loss`` (a scalar tensor) with respect to this optimizer's parameters:
        the gradient, clipped to ``clip_grad_norm``, then the torch optimizer's step. The ``.grad`` of every
        parameter is left as it was (the gradient goes to this optimizer's parameters only, so an actor's loss
        that runs through a critic leaves the critic alone). Returns ``loss`` and ``grad_norm`` as tensors: nothing is
        read back from the device."""
        return self._descend(loss, gradients(loss, self.parameters, fill_zeros=False))

    def _descend(self, loss: torch.Tensor, grads: list[torch.Tensor | None]) -> Info:
        """``minimize``'s step with the gradients of ``loss`` at hand (one per parameter, None where it has none)."""
        grads = [
            None if grad is None else in_layout_of(parameter, grad)
            for parameter, grad in zip(self.parameters, grads, strict=True)
        ]
        if self.clip_grad_norm is not None:  # clipping scales in place: a tensor two parameters share, once
            grads = _unshared(grads)
        present = [grad for grad in grads if grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(present) if present else None
        if self.clip_grad_norm is not None and grad_norm is not None:
            scale = torch.clamp(self.clip_grad_norm / (grad_norm + 1e-6), max=1.0)
            torch._foreach_mul_(present, scale)  # each grad.mul_(scale), in one call
        self._apply_gradients(grads)
        # torch's fused Adam writes the parameters without counting it in their versions, as every other in-place
        # write does; what relies on them (autograd's check of saved tensors, the layers' cast copies) would not see
        # the step
        torch.autograd.graph.increment_version(
            [p for p, grad in zip(self.parameters, grads, strict=True) if grad is not None]
        )
        return {"loss": loss.detach(), "grad_norm": 0.0 if grad_norm is None else grad_norm}

    def _apply_gradients(self, grads: list[torch.Tensor | None]) -> None:
        """One step of the torch optimizer with ``grads`` (None: no gradient); ``.grad`` is left as it was."""
        saved = [parameter.grad for parameter in self.parameters]
        for parameter, grad in zip(self.parameters, grads, strict=True):
            parameter.grad = grad
        try:
            self.torch_optimizer.step()
        finally:
            for parameter, grad in zip(self.parameters, saved, strict=True):
                parameter.grad = grad

    def state_dict(self) -> dict[str, Any]:
        return {"torch": self.torch_optimizer.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.torch_optimizer.load_state_dict(state["torch"])


def minimize_each(steps: list[tuple[TorchOptimizer, torch.Tensor]]) -> list[Info]:
    """``optimizer.minimize(loss)`` for each pair, in order, with the gradients of all the losses taken in one
    backward pass (one run of autograd's engine instead of one per loss). The same steps bit for bit, provided that
    no loss depends on another pair's parameters (PPO's policy and a baseline network of its own): each parameter's
    gradient is then its own loss's, and no step changes what a later loss reads."""
    everyone = [parameter for optimizer, _ in steps for parameter in optimizer.parameters]
    grads = iter(gradients([loss for _, loss in steps], everyone, fill_zeros=False, name="a loss"))
    infos = []
    for optimizer, loss in steps:
        infos.append(optimizer._descend(loss, [next(grads) for _ in optimizer.parameters]))
    return infos


def skip_compiler_import() -> list[Any]:
    """Let torch optimizers be built and stepped without importing torch's compiler, where nothing compiles.

    ``torch.optim.Optimizer`` marks some of its methods as never to be compiled; torch imports its compiler
    (``torch._dynamo``, seconds) the first time one of them runs, only to make that mark, and keeps it on the
    method's function. Here the functions that have no mark yet carry themselves as theirs, so nothing is imported;
    returns them (``without_the_compiler`` unmarks them again). Where a torch release marks them some other way,
    nothing changes: the import only stays."""
    marking = torch._disable_dynamo(lambda: None).__code__  # the wrapper that marks on its first call
    functions = [
        method.__wrapped__
        for method in vars(torch.optim.Optimizer).values()
        if getattr(method, "__code__", None) is marking and hasattr(method, "__wrapped__")
    ]
    unmarked = [function for function in functions if not hasattr(function, "__dynamo_disable")]
    for function in unmarked:
        setattr(function, "__dynamo_disable", function)
    return unmarked


@contextmanager
def without_the_compiler() -> Iterator[None]:
    """``skip_compiler_import`` for the block (an agent built to check a spec, a run that compiles nothing); after
    it, the first use marks the methods as torch would."""
    marked = skip_compiler_import()
    try:
        yield
    finally:
        for function in marked:
            if getattr(function, "__dynamo_disable", None) is function:
                delattr(function, "__dynamo_disable")


def in_layout_of(parameter: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``grad`` with the strides of ``parameter`` (a copy only where they differ). Autograd may hand back a
    parameter's gradient in another memory layout: a conv weight's gradient from channels-last inputs (torchforce's
    image layout) comes out channels-last while the weight is contiguous. The fused Adam kernel (``_fused_adam_``,
    and ``torch.optim.Adam(fused=True)`` through it, torch 2.13 on the CPU) walks parameter and gradient in memory
    order, so such a gradient would be applied to the wrong elements: every conv weight moved by a scrambled
    step."""
    if grad.stride() == parameter.stride():
        return grad
    return torch.empty_like(parameter, memory_format=torch.preserve_format).copy_(grad)


def learning_rate_schedule(learning_rate: Any) -> Schedule:
    """A positive number, or a schedule (``torchforce.core.schedules``) that starts above 0 and may fall to 0."""
    if isinstance(learning_rate, dict):
        return build_schedule(learning_rate, "learning_rate", positive=True)
    rate = expect_positive(learning_rate, "learning_rate")
    return Schedule(rate, rate)


# Adam's fast path calls the kernel behind torch.optim.Adam(fused=True) itself. It is torch's private op, verified on
# the torch versions below; on another version, or if the op is missing or refuses its arguments, Adam takes the
# public path (torch.optim.Adam.step()) instead, which computes the same step a little slower.
FUSED_ADAM_VERIFIED = ("2.13",)


def _fused_adam_kernel() -> Any:
    if not torch.__version__.startswith(FUSED_ADAM_VERIFIED):
        return None
    return getattr(torch, "_fused_adam_", None)


def _fusable(parameter: torch.Tensor) -> bool:
    return parameter.is_floating_point() and parameter.device.type in ("cpu", "cuda")


def _nonnegative(value: Any, path: str) -> float:
    return expect_float(value, path, minimum=0.0)


def _beta(value: Any, path: str) -> float:
    return expect_fraction(value, path, include_one=False)


class _AdaptiveMoments(TorchOptimizer):
    """What Adam and NAdam take: ``torch_class(lr=learning_rate, betas=(beta1, beta2), eps=epsilon)``."""

    torch_class: type[torch.optim.Optimizer]
    extra: dict[str, Any] = {}

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        clip_grad_norm: float | None = None,
    ) -> None:
        super().__init__(
            parameters,
            torch_optimizer=self.torch_class,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
            betas=(_beta(beta1, "beta1"), _beta(beta2, "beta2")),
            eps=_nonnegative(epsilon, "epsilon"),
            **self.extra,
        )
        self._built()

    def _built(self) -> None:
        """What a subclass sets up once the torch optimizer exists."""


class Adam(_AdaptiveMoments):
    """``adam``: ``torch.optim.Adam(lr=learning_rate, betas=(beta1, beta2), eps=epsilon)``."""

    torch_class = torch.optim.Adam
    extra = {"fused": True}  # one kernel for all parameters: ~3x faster steps for small networks on CPU

    def _built(self) -> None:
        group = self.torch_optimizer.param_groups[0]
        same_kind = len({(p.device, p.dtype) for p in self.parameters}) == 1
        self._kernel = _fused_adam_kernel() if group["fused"] and same_kind else None

    def _apply_gradients(self, grads: list[torch.Tensor | None]) -> None:
        """The fused kernel called directly, as ``torch.optim.Adam(fused=True).step()`` calls it (same state
        tensors, so results and ``state_dict`` are identical): skips the ~0.1 ms of Python around it per step,
        which on small networks is as much as the backward pass. Without a verified kernel: the public step."""
        if self._kernel is None:
            return super()._apply_gradients(grads)
        group, state = self.torch_optimizer.param_groups[0], self.torch_optimizer.state
        parameters, present, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for parameter, grad in zip(self.parameters, grads, strict=True):
            if grad is None:
                continue
            moments = state[parameter]
            if not moments:  # torch's lazy initialization for fused Adam
                moments["step"] = torch.zeros((), dtype=torch.float32, device=parameter.device)
                moments["exp_avg"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
                moments["exp_avg_sq"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
            parameters.append(parameter)
            present.append(grad)
            exp_avgs.append(moments["exp_avg"])
            exp_avg_sqs.append(moments["exp_avg_sq"])
            steps.append(moments["step"])
        if not parameters:
            return
        beta1, beta2 = group["betas"]
        with torch.no_grad():
            torch._foreach_add_(steps, 1)  # counted before the step, as torch's fused Adam does
            try:
                self._kernel(
                    parameters,
                    present,
                    exp_avgs,
                    exp_avg_sqs,
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=False,
                    grad_scale=None,
                    found_inf=None,
                )
            except (TypeError, RuntimeError):  # the op refused its arguments: the public path from now on
                torch._foreach_sub_(steps, 1)
                self._kernel = None
                super()._apply_gradients(grads)


class Nadam(_AdaptiveMoments):
    """``nadam``: ``torch.optim.NAdam(lr=learning_rate, betas=(beta1, beta2), eps=epsilon)``."""

    torch_class = torch.optim.NAdam


class GradientDescent(TorchOptimizer):
    """``gradient_descent``: plain ``torch.optim.SGD(lr=learning_rate)``."""

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict,
        clip_grad_norm: float | None = None,
    ) -> None:
        super().__init__(
            parameters,
            torch_optimizer=torch.optim.SGD,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
        )


class Momentum(TorchOptimizer):
    """``momentum``: ``torch.optim.SGD(lr=learning_rate, momentum=momentum, nesterov=use_nesterov)``.

    Same rule as TF's MomentumOptimizer: ``accumulation = momentum * accumulation + grad``, ``p -= lr * accumulation``.
    """

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict,
        momentum: float,
        use_nesterov: bool = False,
        clip_grad_norm: float | None = None,
    ) -> None:
        momentum = _nonnegative(momentum, "momentum")
        if expect_bool(use_nesterov, "use_nesterov") and momentum == 0.0:
            raise SpecError("momentum", "Nesterov momentum needs momentum > 0", got=momentum)
        super().__init__(
            parameters,
            torch_optimizer=torch.optim.SGD,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
            momentum=momentum,
            nesterov=use_nesterov,
        )


class RMSProp(TorchOptimizer):
    """``rmsprop``: ``torch.optim.RMSprop(lr=learning_rate, alpha=decay, momentum, eps=epsilon, centered)``."""

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict,
        decay: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-10,
        centered: bool = False,
        clip_grad_norm: float | None = None,
    ) -> None:
        super().__init__(
            parameters,
            torch_optimizer=torch.optim.RMSprop,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
            alpha=expect_fraction(decay, "decay"),
            momentum=_nonnegative(momentum, "momentum"),
            eps=_nonnegative(epsilon, "epsilon"),
            centered=expect_bool(centered, "centered"),
        )


class Adagrad(TorchOptimizer):
    """``adagrad``: ``torch.optim.Adagrad(lr=learning_rate, initial_accumulator_value=...)``."""

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict,
        initial_accumulator_value: float = 0.1,
        clip_grad_norm: float | None = None,
    ) -> None:
        super().__init__(
            parameters,
            torch_optimizer=torch.optim.Adagrad,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
            initial_accumulator_value=_nonnegative(initial_accumulator_value, "initial_accumulator_value"),
        )


class Adadelta(TorchOptimizer):
    """``adadelta``: ``torch.optim.Adadelta(lr=learning_rate, rho=rho, eps=epsilon)`` (TF's default lr 0.001)."""

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        learning_rate: float | dict = 0.001,
        rho: float = 0.95,
        epsilon: float = 1e-8,
        clip_grad_norm: float | None = None,
    ) -> None:
        super().__init__(
            parameters,
            torch_optimizer=torch.optim.Adadelta,
            clip_grad_norm=clip_grad_norm,
            learning_rate=learning_rate,
            rho=expect_fraction(rho, "rho"),
            eps=_nonnegative(epsilon, "epsilon"),
        )
