"""Iterative solvers used by the optimizers: conjugate gradient and backtracking line search (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor


def conjugate_gradient(
    matvec: Callable[[Tensor], Tensor], b: Tensor, *, max_iterations: int, tolerance: float = 1e-10
) -> Tensor:
    """Approximately solve ``A x = b`` for a symmetric positive definite ``A`` given as ``matvec(v) = A v``.

    Starts at x = 0 and runs at most ``max_iterations`` iterations; stops early when the residual norm is at most
    ``tolerance * |b|``, or when a search direction has non-positive curvature (A not positive definite there).
    """
    x = torch.zeros_like(b)
    residual = b.clone()
    direction = residual.clone()
    residual_norm2 = torch.dot(residual, residual)
    threshold = tolerance**2 * float(residual_norm2)
    for _ in range(max_iterations):
        if float(residual_norm2) <= threshold:
            break
        a_direction = matvec(direction)
        curvature = torch.dot(direction, a_direction)
        if float(curvature) <= 0.0:
            break
        alpha = residual_norm2 / curvature
        x = x + alpha * direction
        residual = residual - alpha * a_direction
        new_norm2 = torch.dot(residual, residual)
        direction = residual + (new_norm2 / residual_norm2) * direction
        residual_norm2 = new_norm2
    return x


class LineSearchResult(NamedTuple):
    """The chosen fraction of the step (0 = undone), the loss there, evaluations after the first, and whether a
    stopping rule chose it (else it is the best fraction tried)."""

    scale: float
    value: float
    iterations: int
    accepted: bool


def step_scales(mode: str, parameter: float, max_iterations: int) -> list[float]:
    """The step fractions tried after the full step: ``parameter**k`` (exponential) or ``1 - k*parameter`` (linear)."""
    scales = []
    for k in range(1, max_iterations + 1):
        scale = parameter**k if mode == "exponential" else 1.0 - k * parameter
        if scale <= 0.0:
            break
        scales.append(scale)
    return scales


def backtracking_line_search(
    evaluate: Callable[[float], float],
    *,
    base_value: float,
    full_step_value: float,
    estimated_improvement: float | None,
    max_iterations: int,
    accept_ratio: float,
    mode: str = "exponential",
    parameter: float = 0.5,
) -> LineSearchResult:
    """Shrink a step until the loss decrease is a large enough share of the predicted one, or stops getting closer.

    ``base_value`` is the loss before the step, ``full_step_value`` the loss after the whole step, and
    ``evaluate(scale)`` the loss with ``scale`` times the step (it may leave the parameters there). The ratio of a
    fraction ``s`` is ``(base_value - loss(s)) / (s * estimated_improvement)``, 2018's "improvement". The search
    stops, as 2018's did, at the first fraction whose ratio reaches ``accept_ratio``, or, when a smaller fraction's
    ratio is no higher than the last one's, at that last fraction (2018 undid the shrink). Unlike 2018, a stop
    needs a real decrease (``base_value - loss(s) > 0``): a fraction that worsens the loss (or is infinite, e.g.
    outside a KL bound) is never kept. Without a positive estimate the full step's own improvement is the estimate,
    so an improving full step is accepted at once and otherwise the first improving fraction is. If nothing stops
    the search within ``max_iterations`` shrinks, the result is the fraction with the lowest loss, 0 (undo) included.

    What the ratio-stop does and does not do: the ratio tends to 1 as ``s`` tends to 0 for any smooth loss. Where
    the loss curves upward along the step (L(s) = L0 - s E + c s^2 / 2, c > 0), the ratio 1 - s c / (2 E) rises with
    every halving, so the ratio-stop never fires and the search halves until the ratio reaches ``accept_ratio``: at
    2018's 0.9 in TRPO, a fifth of the way to the minimum along the step, often 1/16 to 1/256 of a natural-gradient
    step (a KL far under the bound). The ratio-stop fires where the ratio falls as the step shrinks (a Beta policy's
    surrogate: tests/agents/test_trpo.py, where it took TRPO from 4.9 to 5.9 of 10). The TRPO paper accepts at 0.1;
    the shipped CartPole TRPO (a bound of 0.05, 2018's 0.9) reached 475 at 5.3k/10.0k/15.9k steps over seeds 0-2,
    and with 0.1 at 30.6k/25.4k/15.3k; at a bound of 0.01 the two were level (20.5k/25.1k/10.4k against
    15.1k/25.6k/10.0k). So 0.9 stays TRPO's default, with the bound tuned to it.
    """
    if estimated_improvement is None or not estimated_improvement > 0.0:
        estimated_improvement = base_value - full_step_value

    def ratio(scale: float, value: float) -> float:
        improvement = base_value - value
        if not improvement > 0.0:  # no decrease (or NaN): never kept, and lower than any decrease's ratio
            return -math.inf
        return improvement / (scale * estimated_improvement) if estimated_improvement > 0.0 else math.inf

    last = LineSearchResult(1.0, full_step_value, 0, False)
    last_ratio = ratio(1.0, full_step_value)
    if last_ratio >= accept_ratio:
        return last._replace(accepted=True)
    best = last if full_step_value < base_value else LineSearchResult(0.0, base_value, 0, False)
    iterations = 0
    for scale in step_scales(mode, parameter, max_iterations):
        iterations += 1
        value = evaluate(scale)
        current = ratio(scale, value)
        if current >= accept_ratio:
            return LineSearchResult(scale, value, iterations, True)
        if current <= last_ratio and last_ratio > -math.inf:  # shrinking stopped helping: back to the last fraction
            return last._replace(iterations=iterations, accepted=True)
        last, last_ratio = LineSearchResult(scale, value, 0, False), current
        if value < best.value:
            best = last
    return best._replace(iterations=iterations)
