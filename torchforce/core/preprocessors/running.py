"""The steps whose statistics run over the whole run or an episode: ``running_standardize`` (Welford's and Chan's
updates of a mean and variance) and ``running_return_scale`` (the reward half of SB3's VecNormalize)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.core.preprocessors.base import EPSILON, Bounds, Preprocessor, row_indices
from torchforce.spec import SpecError, expect_bool, expect_float


class RunningStandardize(Preprocessor):
    """``(x - mean) / max(std, 1e-6)`` per element, with the mean and sample standard deviation (divisor
    ``count - 1``) of the states seen so far, the current one included (Welford's update in float64, saved in
    ``state_dict``). A first sample has no deviation yet: it passes through unchanged (as float32), as in 2018.

    ``reset_after_batch=True`` (2018 default): the statistics are the episode's. 2018 cleared them at every agent
    reset, i.e. every episode start, so each episode's first state came out raw. Here each row keeps its own and
    ``reset(rows)`` clears those rows (one row is 2018's one environment), so an output depends on the earlier
    steps of its episode (``keeps_episode_state``).
    ``reset_after_batch=False``: one set of statistics for all rows, never cleared (a run-long normalizer); a batch
    is folded in whole (Chan's update) before any of its rows is standardized.
    """

    def __init__(self, *, reset_after_batch: bool = True) -> None:
        self.reset_after_batch = expect_bool(reset_after_batch, "reset_after_batch")
        # per row with reset_after_batch: count [rows], mean and m2 [rows, *shape]; shared: int, [*shape]
        self._count: Any = None if self.reset_after_batch else 0
        self._mean: np.ndarray | None = None
        self._m2: np.ndarray | None = None  # sums of squared deviations from the mean

    @property  # mypy refuses a property over the base's class attribute, which other steps set and tests read
    def keeps_episode_state(self) -> bool:  # type: ignore[override]
        return self.reset_after_batch

    def _update_rows(self, values: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
        """Fold each row's value into that row's statistics; returns the rows' updated count, mean and m2."""
        if len(np.unique(indices)) < len(indices):  # a row twice in one batch: its values in order
            parts = [self._update_rows(values[i : i + 1], indices[i : i + 1]) for i in range(len(indices))]
            return tuple(np.concatenate(part) for part in zip(*parts, strict=True))
        num_rows, shape = int(indices.max()) + 1, values.shape[1:]
        if self._mean is None or self._m2 is None or self._mean.shape[1:] != shape:
            self._count = np.zeros(num_rows, dtype=np.int64)
            self._mean, self._m2 = np.zeros((num_rows, *shape)), np.zeros((num_rows, *shape))
        elif len(self._count) < num_rows:
            extra = num_rows - len(self._count)
            self._count = np.concatenate([self._count, np.zeros(extra, dtype=np.int64)])
            self._mean = np.concatenate([self._mean, np.zeros((extra, *shape))])
            self._m2 = np.concatenate([self._m2, np.zeros((extra, *shape))])
        count = self._count[indices] + 1
        delta = values - self._mean[indices]
        mean = self._mean[indices] + delta / _trailing(count, values.ndim)
        m2 = self._m2[indices] + delta * (values - mean)
        self._count[indices], self._mean[indices], self._m2[indices] = count, mean, m2
        return count, mean, m2

    def _update_shared(self, values: np.ndarray) -> None:
        """Fold the whole batch into the shared statistics (Chan et al.)."""
        if len(values) == 1:  # one environment's step: the same numbers without the reductions' calls
            mean, m2 = values[0].copy(), np.zeros(values.shape[1:])
        else:
            mean = values.mean(axis=0)
            m2 = ((values - mean) ** 2).sum(axis=0)
        if self._mean is None or self._m2 is None or self._mean.shape != mean.shape:
            self._count, self._mean, self._m2 = len(values), mean, m2
        else:
            self._count, self._mean, self._m2 = _folded((self._count, self._mean, self._m2), (len(values), mean, m2))

    @staticmethod
    def combined(states: list[Mapping[str, Any]]) -> dict[str, Any]:
        """The run-wide statistics of several copies' (``state_dict``s of ``reset_after_batch=False`` steps, each
        over the states its own environments gave, as a distributed run's workers keep them) as one: the count,
        mean and m2 of all their states together (Chan et al.), what one normalizer seeing them all would hold."""
        together: tuple[int, np.ndarray, np.ndarray] | None = None
        for state in states:
            if state["mean"] is None or not state["count"]:
                continue
            part = (int(state["count"]), np.asarray(state["mean"], np.float64), np.asarray(state["m2"], np.float64))
            together = part if together is None else _folded(together, part)
        if together is None:
            return {"count": 0, "mean": None, "m2": None}
        return {"count": together[0], "mean": together[1], "m2": together[2]}

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        values = np.asarray(batch, dtype=np.float64)
        indices = row_indices(rows, len(values))
        if len(values) == 0:
            return values.astype(np.float32)
        if self.reset_after_batch:
            count, mean, m2 = self._update_rows(values, indices)
            return _standardized(values, _trailing(count, values.ndim), mean, m2)
        self._update_shared(values)
        return self.process_frozen(values)

    def process_frozen(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        """Shared statistics (``reset_after_batch=False``) standardize the batch as they are, without it; before a
        second sample there is no deviation, and states pass through. Per-episode statistics are the evaluation
        episode's own, so they advance as in ``process``."""
        if self.reset_after_batch:
            return self.process(batch, rows)
        values = np.asarray(batch, dtype=np.float64)
        if self._mean is None or self._m2 is None or self._mean.shape != values.shape[1:]:
            return values.astype(np.float32)
        return _standardized(values, self._count, self._mean, self._m2)

    def frozen_statistics(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The shared statistics as ``process_frozen`` applies them: ``(mean, std)`` in float64, the sample std
        floored at EPSILON; None before a second sample (states pass through). Per-episode statistics
        (``reset_after_batch``) are no one set to freeze: a ValueError."""
        if self.reset_after_batch:
            raise ValueError("per-episode statistics (reset_after_batch) change with every step of an episode")
        if self._mean is None or self._m2 is None or self._count <= 1:
            return None
        return self._mean.copy(), np.maximum(np.sqrt(self._m2 / (self._count - 1)), EPSILON)

    def reset(self, rows: Any = None) -> None:
        if not self.reset_after_batch:
            return
        if rows is None or self._mean is None or self._m2 is None:
            self._count = self._mean = self._m2 = None
            return
        indices = row_indices(rows, -1)
        indices = indices[indices < len(self._count)]
        self._count[indices], self._mean[indices], self._m2[indices] = 0, 0.0, 0.0

    def state_dict(self) -> dict[str, Any]:
        copy_or_none = lambda value: value.copy() if isinstance(value, np.ndarray) else value  # noqa: E731
        return {"count": copy_or_none(self._count), "mean": copy_or_none(self._mean), "m2": copy_or_none(self._m2)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        count = state["count"]
        if self.reset_after_batch and count is not None and np.ndim(count) == 0:
            # a checkpoint from before statistics were per row (shared by all rows, never cleared): the rows start
            # over, as each would at its next episode
            self._count = self._mean = self._m2 = None
            return
        if self.reset_after_batch:
            self._count = None if count is None else np.array(count, dtype=np.int64).reshape(-1)
        else:
            self._count = int(count)
        self._mean = None if state["mean"] is None else np.array(state["mean"], dtype=np.float64)
        self._m2 = None if state["m2"] is None else np.array(state["m2"], dtype=np.float64)


def _standardized(values: np.ndarray, count: Any, mean: np.ndarray, m2: np.ndarray) -> np.ndarray:
    """``(values - mean) / max(std, 1e-6)`` with the sample std of ``count`` samples; values as they are where
    ``count`` is 1 or less (no deviation yet). ``count`` is one number for every row (shared statistics) or an array
    that broadcasts against ``values`` (per row)."""
    shared = np.ndim(count) == 0
    if shared and count <= 1:
        return values.astype(np.float32)
    samples_less_one = count - 1 if shared else np.maximum(count - 1, 1)  # shared: 2 or more here
    scores = (values - mean) / np.maximum(np.sqrt(m2 / samples_less_one), EPSILON)
    return (scores if shared else np.where(count > 1, scores, values)).astype(np.float32)


def _folded(
    first: tuple[int, np.ndarray, np.ndarray], second: tuple[int, np.ndarray, np.ndarray]
) -> tuple[int, np.ndarray, np.ndarray]:
    """Two sets of statistics ``(count, mean, m2)`` as one (Chan et al.'s parallel update)."""
    (count, mean, m2), (other, other_mean, other_m2) = first, second
    total = count + other
    delta = other_mean - mean
    return total, mean + delta * (other / total), m2 + other_m2 + delta**2 * (count * other / total)


def _trailing(values: np.ndarray, ndim: int) -> np.ndarray:
    """``values`` with trailing axes of size 1 up to ``ndim`` axes (a per-row number against [rows, *shape])."""
    return values.reshape(values.shape + (1,) * (ndim - values.ndim))


#: the weight of the pseudo-sample (mean 0, variance 1) running_return_scale's statistics start from, as SB3's
#: RunningMeanStd does: the first returns meet a variance of about 1e-4, not none
PRIOR_COUNT = 1e-4


class RunningReturnScale(Preprocessor):
    """Rewards divided by the running standard deviation of the discounted return, then clipped:
    ``clip(r / sqrt(var + epsilon), -clip, clip)``, the reward half of SB3's VecNormalize (what rl-baselines3-zoo's
    ``normalize: true`` turns on). It brings the values a critic regresses onto to a scale near 1 whatever the
    environment pays, without shifting the rewards (a shift would change what ending an episode is worth).

    Each row keeps its episode's discounted return ``R <- discount * R + r``, zero again when the row starts an
    episode (``start_episodes``; the agent says so to its reward steps). The returns of a batch's rows are folded
    into one mean and population variance for the whole run (Chan et al.), from a pseudo-sample of weight 1e-4 at
    mean 0 and variance 1 as in SB3, and then the batch's rewards are scaled. ``discount``: in an agent's
    ``reward_preprocessing``, the agent's unless given (the zoo passes the algorithm's gamma); 0.99 on its own.
    Statistics and returns are float64, all in ``state_dict``: a resumed run scales exactly as an uninterrupted one.
    For rewards only (scalars).
    """

    keeps_episode_state = True

    def __init__(self, *, discount: float = 0.99, clip: float = 10.0, epsilon: float = 1e-8) -> None:
        self.discount = expect_float(discount, "discount", minimum=0.0, maximum=1.0)
        self.clip = expect_float(clip, "clip", finite=False)  # inf: no clipping
        if not self.clip > 0.0:
            raise SpecError("clip", "must be above 0", got=clip, expected="e.g. 10")
        self.epsilon = expect_float(epsilon, "epsilon", minimum=0.0)
        self._returns = np.zeros(0)  # [rows]: each row's discounted return so far
        self._count, self._mean, self._variance = PRIOR_COUNT, 0.0, 1.0

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if shape:
            raise ValueError("it scales rewards, which are scalars")
        return ()

    def processed_bounds(self, low: float | None, high: float | None) -> Bounds:
        return (None, None) if math.isinf(self.clip) else (-self.clip, self.clip)

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        rewards = np.asarray(batch, dtype=np.float64)
        indices = row_indices(rows, len(rewards))
        if len(rewards) == 0:
            return rewards.astype(np.float32)
        if rows is not None and len(np.unique(indices)) < len(indices):  # a row twice in a batch: its steps in order
            return np.concatenate([self.process(rewards[i : i + 1], indices[i : i + 1]) for i in range(len(indices))])
        if len(self._returns) <= indices.max():
            self._returns = np.concatenate([self._returns, np.zeros(indices.max() + 1 - len(self._returns))])
        returns = self._returns[indices] * self.discount + rewards
        self._returns[indices] = returns
        self._fold(returns)
        return self.process_frozen(rewards, indices)

    def process_frozen(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        """The rewards scaled by the statistics as they are; neither the returns nor the statistics move."""
        scaled = np.asarray(batch, dtype=np.float64) / math.sqrt(self._variance + self.epsilon)
        return np.minimum(np.maximum(scaled, -self.clip), self.clip).astype(np.float32)  # np.clip, in fewer calls

    def _fold(self, returns: np.ndarray) -> None:
        """Fold a batch of returns into the running mean and population variance (Chan et al.)."""
        size, total = len(returns), self._count + len(returns)
        # one environment's step: the same numbers without the reductions' calls
        mean, variance = (returns[0], 0.0) if size == 1 else (returns.mean(), returns.var())
        delta = mean - self._mean
        squares = self._variance * self._count + variance * size + delta**2 * self._count * size / total
        self._mean += delta * size / total
        self._variance = squares / total
        self._count = total

    def start_episodes(self, rows: Any = None) -> None:
        if rows is None:  # rebound, not cleared in place: a copy of ``apart`` shares nothing with this one
            self._returns = np.zeros_like(self._returns)
            return
        indices = row_indices(rows, -1)
        self._returns[indices[indices < len(self._returns)]] = 0.0

    def reset(self, rows: Any = None) -> None:
        """An episode start, as for the reward (the step is only for scalars, so a scalar state gets the same)."""
        self.start_episodes(rows)

    def state_dict(self) -> dict[str, Any]:
        return {"count": self._count, "mean": self._mean, "variance": self._variance, "returns": self._returns.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._count, self._mean = float(state["count"]), float(state["mean"])
        self._variance = float(state["variance"])
        self._returns = np.array(state["returns"], dtype=np.float64).reshape(-1)
