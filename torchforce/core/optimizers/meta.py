"""Meta optimizers: they wrap the optimizer of their nested ``optimizer`` spec and change how its steps are taken.

PPO's implicit optimizer is ``multi_step(subsampling_step(step_optimizer))``; TRPO's is
``optimized_step(natural_gradient)``. ``*_unroll_loop`` flags only chose between a TF while-loop and an unrolled
graph in 2018; they are accepted for old configs and have no effect here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor

from torchforce.core.optimizers.base import (
    Batch,
    Info,
    MetaOptimizer,
    Objective,
    Reference,
    Update,
    add_,
    differences,
    expect_fraction,
    expect_positive,
    restore,
    snapshot,
)
from torchforce.core.optimizers.solvers import backtracking_line_search
from torchforce.spec import expect_bool, expect_choice, expect_float
from torchforce.spec.checks import expect_steps


class MultiStep(MetaOptimizer):
    """``multi_step``: ``num_steps`` inner steps on the same batch and the same reference (computed once, first).

    Info: the inner info of the first step (its ``loss`` is the loss before any update), ``last_loss`` (the loss
    the last inner step started from) and ``num_steps``.
    """

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        optimizer: Any,
        num_steps: int = 10,
        unroll_loop: bool = False,
    ) -> None:
        super().__init__(parameters, optimizer=optimizer)
        self.num_steps = expect_steps(num_steps, "num_steps")
        expect_bool(unroll_loop, "unroll_loop")

    @property
    def inner_steps(self) -> int:
        return self.num_steps * super().inner_steps

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        before = snapshot(self.parameters)
        info: Info = {}
        for index in range(self.num_steps):
            inner = self.optimizer.apply_update(objective, batch, reference)
            if index == 0:
                info = dict(inner.info)
            info["last_loss"] = inner.info["loss"]
        info["num_steps"] = float(self.num_steps)
        return Update(differences(self.parameters, before), info)


class SubsamplingStep(MetaOptimizer):
    """``subsampling_step``: the inner step sees ``max(1, int(fraction * B))`` rows drawn with replacement.

    The same rows are taken from every batch tensor (nested dicts included) and from every reference tensor whose
    leading dimension is the batch size B; other reference values pass unchanged. Rows come from
    ``torch.randint`` on torch's global RNG. Info: the inner info plus ``subsample_size``.
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], *, optimizer: Any, fraction: float = 0.1) -> None:
        super().__init__(parameters, optimizer=optimizer)
        self.fraction = expect_fraction(fraction, "fraction", include_zero=False)

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        size = batch_size(batch)
        count = max(1, int(self.fraction * size))
        indices = torch.randint(size, (count,))
        subsample = take_rows(batch, indices, size)
        inner = self.optimizer.apply_update(objective, subsample, take_rows(reference, indices, size))
        # the inner step's predicted improvement travels on, as in 2018: a line search around this step judges by it
        return Update(inner.deltas, {**inner.info, "subsample_size": float(count)}, inner.estimated_improvement)


def batch_size(batch: Any) -> int:
    """The common leading size of every tensor in a (nested) batch dict; a ValueError when they disagree."""
    sizes: set[int] = set()

    def visit(value: Any) -> None:
        if isinstance(value, Tensor):
            if value.dim() == 0:
                raise ValueError("batch tensors need a leading batch dimension, got a scalar tensor")
            sizes.add(value.shape[0])
        elif isinstance(value, Mapping):
            for item in value.values():
                visit(item)

    visit(batch)
    if len(sizes) != 1:
        raise ValueError(f"batch tensors must share one leading batch size, got sizes {sorted(sizes)}")
    return sizes.pop()


def take_rows(value: Any, indices: Tensor, size: int) -> Any:
    """``value[indices]`` for every tensor with leading dimension ``size`` in a tensor, dict, list or tuple."""
    if isinstance(value, Tensor):
        if value.dim() > 0 and value.shape[0] == size:
            return value.index_select(0, indices.to(value.device))  # faster than value[indices] for large rows
        return value
    if isinstance(value, Mapping):
        return {key: take_rows(item, indices, size) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(take_rows(item, indices, size) for item in value)
    return value


class ClippedStep(MetaOptimizer):
    """``clipped_step``: the inner step's deltas are clipped element-wise to ``[-clipping_value, clipping_value]``.

    As in 2018 this clips the applied parameter change, not the gradient (for that, use ``clip_grad_norm`` on a
    gradient optimizer).
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], *, optimizer: Any, clipping_value: float) -> None:
        super().__init__(parameters, optimizer=optimizer)
        self.clipping_value = expect_positive(clipping_value, "clipping_value")

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        before = snapshot(self.parameters)
        inner = self.optimizer.apply_update(objective, batch, reference)
        clipped = [delta.clamp(-self.clipping_value, self.clipping_value) for delta in inner.deltas]
        restore(self.parameters, before)
        add_(self.parameters, clipped)
        return Update(clipped, dict(inner.info))


class OptimizedStep(MetaOptimizer):
    """``optimized_step``: the inner step, then a backtracking line search along it on ``loss_fn``.

    The search tries fractions ``ls_parameter**k`` (``exponential``) or ``1 - k*ls_parameter`` (``linear``) of the
    step, ``k = 1..ls_max_iterations``, and accepts one whose loss decrease is at least ``ls_accept_ratio`` times
    the predicted decrease (the inner optimizer's estimate, e.g. natural_gradient's, scaled by the fraction; else
    the full step's own decrease), or, as 2018, stops at the last fraction once shrinking no longer raises that
    ratio. Otherwise it keeps the best fraction evaluated, and undoes the step when none improves the loss (see
    ``solvers.backtracking_line_search``). ``ls_max_kl`` (not in 2018; needs
    ``kl_fn``) also rejects fractions whose KL from the reference exceeds it, as the TRPO paper's line search does.
    Info: the inner info, ``loss`` (before the step), ``loss_after``, ``ls_scale`` and ``ls_iterations``.
    """

    kl_key = "ls_max_kl"  # needs_kl: only with an ls_max_kl

    def __init__(
        self,
        parameters: Iterable[torch.nn.Parameter],
        *,
        optimizer: Any,
        ls_max_iterations: int = 10,
        ls_accept_ratio: float = 0.9,
        ls_mode: str = "exponential",
        ls_parameter: float = 0.5,
        ls_unroll_loop: bool = False,
        ls_max_kl: float | None = None,
    ) -> None:
        super().__init__(parameters, optimizer=optimizer)
        self.ls_max_kl = expect_float(ls_max_kl, "ls_max_kl", minimum=0.0, allow_none=True, finite=False)
        self.needs_kl = self.ls_max_kl is not None
        self.ls_max_iterations = expect_steps(ls_max_iterations, "ls_max_iterations", minimum=0)
        self.ls_accept_ratio = expect_float(ls_accept_ratio, "ls_accept_ratio", minimum=0.0)
        self.ls_mode = expect_choice(ls_mode, "ls_mode", ("exponential", "linear"))
        self.ls_parameter = expect_fraction(ls_parameter, "ls_parameter", include_zero=False, include_one=False)
        expect_bool(ls_unroll_loop, "ls_unroll_loop")

    @property
    def inner_steps(self) -> int:
        return super().inner_steps + self.ls_max_iterations + 1  # the step, then a loss per fraction tried

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        before = snapshot(self.parameters)
        with torch.no_grad():
            base_value = float(objective.loss(batch, reference))
        inner = self.optimizer.apply_update(objective, batch, reference)
        step = [delta.detach().clone() for delta in inner.deltas]
        full_step_value = self._value(objective, batch, reference)

        def move_to(scale: float) -> None:
            restore(self.parameters, before)
            if scale != 0.0:
                add_(self.parameters, step, scale)

        def evaluate(scale: float) -> float:
            move_to(scale)
            return self._value(objective, batch, reference)

        result = backtracking_line_search(
            evaluate,
            base_value=base_value,
            full_step_value=full_step_value,
            estimated_improvement=inner.estimated_improvement,
            max_iterations=self.ls_max_iterations,
            accept_ratio=self.ls_accept_ratio,
            mode=self.ls_mode,
            parameter=self.ls_parameter,
        )
        if result.iterations > 0 or result.scale != 1.0:
            move_to(result.scale)
        info = {
            **inner.info,
            "loss": base_value,
            "loss_after": result.value,
            "ls_scale": result.scale,
            "ls_iterations": float(result.iterations),
        }
        return Update(differences(self.parameters, before), info)

    def _value(self, objective: Objective, batch: Batch, reference: Reference) -> float:
        """The loss where the parameters are; infinite outside the trust region ``ls_max_kl``, so the search treats
        such a fraction as no improvement."""
        with torch.no_grad():
            if self.ls_max_kl is not None and float(objective.kl(batch, reference)) > self.ls_max_kl:
                return math.inf
            return float(objective.loss(batch, reference))


class GlobalOptimizer(MetaOptimizer):
    """``global_optimizer``: accepted so 2018 distributed configs load; it simply runs its inner optimizer.

    In 2018 it applied the local step to the parameter server's variables and copied them back. Here the
    distributed runner does that itself, whatever the optimizer (``torchforce/execution/distributed.py``: each
    worker sends the change its own steps made to the parameters, and the parameter servers add it to theirs), so
    this wrapper adds nothing.
    """

    def apply_update(self, objective: Objective, batch: Batch, reference: Reference) -> Update:
        return self.optimizer.apply_update(objective, batch, reference)
