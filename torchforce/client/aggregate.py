"""The statistics of runs and of groups of runs (the seeds of one setup): smoothing, a bootstrap confidence
interval over seeds, the interquartile mean, curves of several runs on one grid, and when a curve first reaches a
threshold. Pure functions of numbers (numpy only), so that every figure tfcli shows can be checked by hand.

One smoothing rule everywhere: a run's return at an episode is the mean of its last ``window`` episode returns
(fewer at the start), the same in ``list``, ``show``, ``compare`` and ``plot``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WINDOW = 100  # episodes a return is averaged over unless a command's --window says otherwise
CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # the resampling is fixed, so the same results always show the same interval
GRID_POINTS = 200  # where a group's curves are compared: this many timesteps, evenly spread


def running_mean(values: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """Mean of the last ``window`` values (fewer at the start), one per value. A NaN or infinite value makes the
    means of the windows that hold it NaN (or infinite), and no others."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return values
    finite = np.isfinite(values)
    sums = np.cumsum(np.insert(np.where(finite, values, 0.0), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    counts = np.minimum(ends, window)
    means = (sums[ends] - sums[ends - counts]) / counts
    if not finite.all():  # the few windows that hold a non-finite value, each computed on its own
        others = np.cumsum(np.insert(~finite, 0, False))
        for index in np.flatnonzero(others[ends] - others[ends - counts]):
            means[index] = values[ends[index] - counts[index] : ends[index]].mean()
    return means


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """The mean of the middle half: a quarter of the values (rounded down) dropped at each end, as
    ``scipy.stats.trim_mean(values, 0.25)`` does. Less swayed by one lucky or unlucky seed than the mean, and
    steadier than the median with few seeds."""
    ordered = np.sort(np.asarray(values, dtype=float))
    if len(ordered) == 0:
        raise ValueError("the interquartile mean of no values")
    cut = len(ordered) // 4
    return float(ordered[cut : len(ordered) - cut].mean())


def bootstrap_band(
    curves: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``curves`` (one row per seed, one column per point): the mean across seeds at each point, and the
    percentile bootstrap interval of that mean. Each resample draws as many seeds as there are, with replacement,
    and uses them at every point (a seed's curve stays whole). The generator is seeded, so the same curves always
    give the same band; one seed, or identical seeds, give a band of zero width."""
    curves = np.atleast_2d(np.asarray(curves, dtype=float))
    count = len(curves)
    if count == 0:
        raise ValueError("a confidence band needs at least one curve")
    # where every seed has the same value, that value is the mean and the band (sums of it may round off it)
    same = curves.min(axis=0) == curves.max(axis=0)
    mean = np.where(same, curves[0], curves.mean(axis=0))
    if count == 1:
        return mean, mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(count, np.full(count, 1.0 / count), size=resamples) / count  # a resample's seeds
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(weights @ curves, [tail, 1.0 - tail], axis=0)
    return mean, np.where(same, mean, np.minimum(low, mean)), np.where(same, mean, np.maximum(high, mean))


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (one per seed); see ``bootstrap_band``. One
    value gives an interval of zero width, which is no interval: the tables show none for a group of one seed."""
    column = np.asarray(values, dtype=float)[:, None]
    _, low, high = bootstrap_band(column, confidence=confidence, resamples=resamples, seed=seed)
    return float(low[0]), float(high[0])


def monotone(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` in the order of ``x`` with one point per ``x`` (the last one logged of equal ones): what
    interpolation needs. Episodes of parallel workers can end at the same timestep."""
    order = np.argsort(np.asarray(x), kind="stable")
    x, y = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    last = np.append(x[1:] != x[:-1], True)
    return x[last], y[last]


def common_grid(xs: Sequence[np.ndarray], points: int = GRID_POINTS, *, hold: bool = False) -> np.ndarray:
    """``points`` evenly spread values over the range every curve covers: from the latest first ``x`` to the
    earliest last one (a mean across seeds only where every seed has data). Empty when the ranges do not
    overlap. ``hold``: on to the latest last ``x`` instead, for curves held at their last value past their own end
    (see ``aligned``); then empty only when a curve is."""
    if not xs or any(len(x) == 0 for x in xs):
        return np.empty(0)
    ends = [float(np.max(x)) for x in xs]
    start, end = max(float(np.min(x)) for x in xs), max(ends) if hold else min(ends)
    if start > end:
        return np.empty(0)
    return np.unique(np.linspace(start, end, points))


def overlapping(xs: Sequence[np.ndarray]) -> list[int]:
    """The indices of the curves (their ``x``, each non-empty) that a mean curve can be drawn over: all of them when
    their ranges have more than a point in common, else without the curves that have come least far (the smallest
    last ``x``), one by one, until the rest do, or one is left."""
    kept = list(range(len(xs)))
    while len(kept) > 1:
        start, end = max(float(np.min(xs[i])) for i in kept), min(float(np.max(xs[i])) for i in kept)
        if start < end:
            break
        kept.remove(min(kept, key=lambda i: (float(np.max(xs[i])), -float(np.min(xs[i])))))
    return kept


def aligned(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS, *, hold: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Curves ``(x, y)`` of several runs on one grid (``common_grid``), each interpolated linearly: the grid and a
    matrix with one row per curve.

    Without ``hold`` the grid stops where the first curve stops, so that no value is made up. With it the grid
    runs on to where the last curve stops, and a curve that stopped before keeps its last value, as a run that
    ended (or has not got so far yet) keeps its final return: the mean curve then ends at the mean of the curves'
    last values, and a run that ended a few steps before the others, or lags far behind, still counts. A curve is
    never held before its first ``x``: that would credit a run with a return it had not reached yet."""
    cleaned = [monotone(x, y) for x, y in curves]
    grid = common_grid([x for x, _ in cleaned], points, hold=hold)
    return grid, np.array([np.interp(grid, x, y) for x, y in cleaned]).reshape(len(cleaned), len(grid))


def first_crossing(smoothed: np.ndarray, threshold: float) -> int | None:
    """The index of the first value at or above ``threshold``, or None when none is."""
    reached = np.flatnonzero(np.asarray(smoothed) >= threshold)
    return int(reached[0]) if len(reached) else None


@dataclass(frozen=True)
class Spread:
    """How a figure varies across seeds: its median and its range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(float(np.median(values)), float(np.min(values)), float(np.max(values)))
