"""State and reward preprocessors (docs/tensorforce-0.4.md, Preprocessors), spec keys ``states_preprocessing`` /
``reward_preprocessing``.

Numpy in, numpy out, batch first: ``process(batch [B, *shape], rows=None) -> [B, *processed_shape]``. ``rows``
says which per-row slots the batch rows belong to (default ``0..B-1``); ``sequence``, ``running_standardize`` and
``running_return_scale`` keep per-row state. Steps that compute values (standardize, running_standardize,
running_return_scale, normalize, grayscale, image_resize, divide) output float32; the others (sequence, clip,
flatten, expand_dims) keep the dtype. Preprocessed states are what the agent feeds its network and stores in memory.

Normalization as rl-baselines3-zoo's ``normalize: true`` (SB3's VecNormalize) does it: states
``[{"type": "running_standardize", "reset_after_batch": false}, {"type": "clip", "min_value": -10, "max_value":
10}]``, reward ``{"type": "running_return_scale"}`` (the agent's discount, clip 10). The state half differs
from VecNormalize only in its first samples: VecNormalize starts from a pseudo-sample of weight 1e-4 (mean 0,
variance 1) and divides by ``sqrt(var + 1e-8)`` of the population variance, running_standardize passes the first
state through and divides by ``max(std, 1e-6)`` of the sample variance; after n states their scales differ by
about ``sqrt(n / (n - 1))`` (``tests/core/test_normalization.py`` shows the numbers on HalfCheetah). Independent acting
(evaluation) processes states with ``process_frozen``: statistics of the whole run are applied as they are and
learn nothing, as VecNormalize with ``training=False``; steps with state of an episode work on copies of their own
(``PreprocessorStack.apart``); rewards are only processed when the agent observes.

2018 semantics (TensorForce 0.4.0-0.4.3, ``core/preprocessors/*.py``), kept: running_standardize passes an
episode's first state through raw, then standardizes with the sample variance and ``max(std, 1e-6)``, its
statistics cleared at every episode start when ``reset_after_batch``; standardize uses the population variance
and ``max(std, 1e-6)``; normalize ``(x - min) / (max - min + 1e-6)`` per instance; sequence repeats an episode's
first frame ``length`` times; grayscale sums ``weights * channels`` over the last axis. Deliberate deviations,
each where 2018 had a plain bug:

- More than one row (parallel environments, import_experience). 2018 only ever saw one: sequence asserted it, and
  running_standardize counted a batch as one sample while summing all its deviations. Here sequence keeps a buffer
  and running_standardize (with ``reset_after_batch``) statistics per row, each reset at that row's episode start.
- sequence with ``length > 2``: 2018's ring-buffer index was off by one, giving frames in the order ``t-1, t-2,
  ..., t-length+1, t`` (neither forward nor backward in time). Here frames run oldest to newest; for the default
  ``length=2`` both orders are ``t-1, t``, and to a network any fixed order is only a permutation of its inputs.
- image_resize: 2018 passed ``(width, height)`` where TensorFlow takes ``(height, width)``, so its output had
  ``width`` rows; here ``height`` is the rows. 2018's TF1 bilinear also sampled a grid shifted by half a pixel
  without antialiasing; Pillow's bilinear is centred and averages when downscaling.
- expand_dims with ``axis >= 0``: 2018 declared the axis inside the state but inserted it at that index of the
  batched tensor (one axis too early; broken unless it met the batch of one at axis 0). Here the output matches
  the declared shape.
- A single ``{"type": ...}`` states spec: 2018 built one stack and shared it, variables included, between all
  states; and it gave every step of a stack the unprocessed state shape, so running_standardize failed after a
  shape-changing step. Here every state gets its own stack and each step the shape it actually receives.
"""

from __future__ import annotations

import collections.abc
import copy
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from torchforce.spec import SpecError, StateSpec, expect_bool, expect_float, expect_int, unknown_name_error, warn_spec
from torchforce.spec.checks import expect_elements
from torchforce.spec.errors import what_it_is
from torchforce.spec.registry import Registry

PREPROCESSORS = Registry(
    "preprocessor",
    {
        "clip": "torchforce.core.preprocessors:Clip",
        "divide": "torchforce.core.preprocessors:Divide",
        "expand_dims": "torchforce.core.preprocessors:ExpandDims",
        "flatten": "torchforce.core.preprocessors:Flatten",
        "grayscale": "torchforce.core.preprocessors:Grayscale",
        "image_resize": "torchforce.core.preprocessors:ImageResize",
        "normalize": "torchforce.core.preprocessors:Normalize",
        "running_return_scale": "torchforce.core.preprocessors:RunningReturnScale",
        "running_standardize": "torchforce.core.preprocessors:RunningStandardize",
        "sequence": "torchforce.core.preprocessors:Sequence",
        "standardize": "torchforce.core.preprocessors:Standardize",
    },
    base="torchforce.core.preprocessors:Preprocessor",
)

#: 2018's util.epsilon: the floor of a standard deviation (standardize), added to a range (normalize)
EPSILON = 1e-6

Bounds = tuple[float | None, float | None]


def row_indices(rows: Any, batch_size: int) -> np.ndarray:
    """``rows`` as an index array: None -> ``0..batch_size-1``; a bool mask -> its true positions."""
    if rows is None:
        return np.arange(batch_size)
    rows = np.asarray(rows)
    if rows.dtype == np.bool_:
        rows = np.flatnonzero(rows)
    rows = rows.astype(np.int64, copy=False).reshape(-1)
    if batch_size >= 0 and len(rows) != batch_size:
        raise ValueError(f"rows names {len(rows)} rows for a batch of {batch_size}")
    return rows


class Preprocessor:
    """One step. Subclasses override ``processed_shape`` (raising ValueError for a shape they cannot process)
    and ``process``; stateful ones also ``reset``, ``state_dict`` and ``load_state_dict``."""

    #: whether the output is float32 (values computed), rather than the input dtype (values moved or clipped)
    produces_float = True
    #: whether a row's output depends on the earlier steps of its episode (``sequence``, ``running_standardize``
    #: with ``reset_after_batch``): such a step must see each episode from its start, in order, one row per episode
    keeps_episode_state = False

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape)

    def processed_bounds(self, low: float | None, high: float | None) -> Bounds:
        """Known value bounds after this step (None when unknown)."""
        return (None, None) if self.produces_float else (low, high)

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        raise NotImplementedError

    def process_frozen(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        """``process`` that learns nothing from ``batch``: a step with statistics of the whole run applies them as
        they are (what evaluation needs: SB3's VecNormalize with ``training=False``). State of the episode in
        progress (sequence's frames, per-episode running_standardize) still advances: independent acting gives
        such steps copies of their own (``apart``). By default ``process``."""
        return self.process(batch, rows)

    def reset(self, rows: Any = None) -> None:
        pass

    def apart(self) -> Preprocessor:
        """The step for acting apart from the training rows (evaluation): this one where it keeps no state of an
        episode (statistics of the whole run are applied frozen), else a copy whose episodes start fresh, so that
        evaluation neither reads nor advances the training rows' frames or statistics. (``reset()`` of every row
        rebinds a step's state rather than clearing it in place, so the copy shares nothing that changes.)"""
        if not self.keeps_episode_state:
            return self
        fresh = copy.copy(self)
        fresh.reset()
        return fresh

    def start_episodes(self, rows: Any = None) -> None:
        """``rows`` start new episodes, said to the reward's steps (states' steps get ``reset``). Only a step whose
        reward depends on the episode's earlier rewards does anything: 2018 never reset reward preprocessing, and
        running_standardize on rewards keeps its statistics across episodes as it did then."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def __repr__(self) -> str:
        arguments = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({arguments})"


def kind_name(preprocessor: Preprocessor) -> str:
    """The registry-style name of a preprocessor's class (``ImageResize`` -> ``image_resize``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(preprocessor).__name__).lower()


def _float(batch: np.ndarray) -> np.ndarray:
    return np.asarray(batch, dtype=np.float32)


class Sequence(Preprocessor):
    """Stacks the last ``length`` frames of each row: ``(*shape, length)`` with ``add_rank``, else the frames
    are concatenated along the last axis, ``(*shape[:-1], shape[-1] * length)`` (a scalar state always gets the
    new axis). Frames run oldest to newest. After ``reset(rows)`` (an episode start), a row's first frame is
    repeated ``length`` times. Works for any batch size (2018 asserted a batch of 1).
    """

    produces_float = False
    keeps_episode_state = True

    def __init__(self, *, length: int = 2, add_rank: bool = False) -> None:
        self.length = expect_int(length, "length", minimum=1)
        self.add_rank = expect_bool(add_rank, "add_rank")
        self._buffer: np.ndarray | None = None  # [rows, length, *shape]
        self._fresh: np.ndarray | None = None  # [rows] bool: the row starts over at its next frame

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if self.add_rank or not shape:
            return (*shape, self.length)
        return (*shape[:-1], shape[-1] * self.length)

    def _ensure(self, num_rows: int, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The buffer and the fresh flags, for at least ``num_rows`` rows of frames like ``batch``'s."""
        frame_shape, dtype = batch.shape[1:], batch.dtype
        buffer, fresh = self._buffer, self._fresh
        if buffer is None or fresh is None or buffer.shape[2:] != frame_shape:
            buffer = np.zeros((num_rows, self.length, *frame_shape), dtype=dtype)
            fresh = np.ones(num_rows, dtype=bool)
        elif len(buffer) < num_rows:
            extra = num_rows - len(buffer)
            padding = np.zeros((extra, *buffer.shape[1:]), dtype=buffer.dtype)
            buffer = np.concatenate([buffer, padding])
            fresh = np.concatenate([fresh, np.ones(extra, dtype=bool)])
        self._buffer, self._fresh = buffer, fresh
        return buffer, fresh

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        batch = np.asarray(batch)
        indices = row_indices(rows, len(batch))
        if len(indices) == 0:
            return np.zeros((0, *self.processed_shape(batch.shape[1:])), dtype=batch.dtype)
        buffer, fresh_rows = self._ensure(int(indices.max()) + 1, batch)
        batch = batch.astype(buffer.dtype, copy=False)  # frames keep the dtype of the first batch
        frames = buffer[indices]  # a copy: [B, length, *shape]
        frames[:, :-1] = frames[:, 1:]
        frames[:, -1] = batch
        fresh = fresh_rows[indices]
        if fresh.any():
            frames[fresh] = batch[fresh][:, None]
        buffer[indices] = frames
        fresh_rows[indices] = False
        if self.add_rank or batch.ndim == 1:
            return np.ascontiguousarray(np.moveaxis(frames, 1, -1))
        stacked = np.moveaxis(frames, 1, -2)  # [B, *shape[:-1], length, last]
        return stacked.reshape(*stacked.shape[:-2], -1)

    def reset(self, rows: Any = None) -> None:
        if rows is None or self._fresh is None:
            self._buffer = self._fresh = None
            return
        indices = row_indices(rows, -1)
        self._fresh[indices[indices < len(self._fresh)]] = True

    def state_dict(self) -> dict[str, Any]:
        if self._buffer is None or self._fresh is None:
            return {"buffer": None, "fresh": None}
        return {"buffer": self._buffer.copy(), "fresh": self._fresh.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        buffer, fresh = state["buffer"], state["fresh"]
        self._buffer = None if buffer is None else np.array(buffer)
        self._fresh = None if fresh is None else np.array(fresh, dtype=bool)


class Standardize(Preprocessor):
    """``(x - mean) / max(std, 1e-6)`` with the mean and (population) standard deviation of each instance
    (``across_batch=False``) or of the whole batch (``across_batch=True``, all axes including the batch)."""

    def __init__(self, *, across_batch: bool = False) -> None:
        self.across_batch = expect_bool(across_batch, "across_batch")

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        batch = _float(batch)
        axes = None if self.across_batch else tuple(range(1, batch.ndim))
        mean = batch.mean(axis=axes, keepdims=True)
        std = batch.std(axis=axes, keepdims=True)
        return ((batch - mean) / np.maximum(std, EPSILON)).astype(np.float32, copy=False)


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


class Normalize(Preprocessor):
    """Min-max scaling of each instance: ``(x - min) / (max - min + 1e-6)``, into [0, 1)."""

    def processed_bounds(self, low: float | None, high: float | None) -> Bounds:
        return 0.0, 1.0

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        batch = _float(batch)
        axes = tuple(range(1, batch.ndim))
        low = batch.min(axis=axes, keepdims=True)
        high = batch.max(axis=axes, keepdims=True)
        return ((batch - low) / (high - low + EPSILON)).astype(np.float32, copy=False)


class Grayscale(Preprocessor):
    """Weighted sum over the last (color) axis: ``(..., C) -> (..., 1)``, or ``(...)`` with ``remove_rank``."""

    def __init__(
        self, *, weights: collections.abc.Sequence[float] = (0.299, 0.587, 0.114), remove_rank: bool = False
    ) -> None:
        if not isinstance(weights, collections.abc.Sequence) or isinstance(weights, str) or not weights:
            raise SpecError("weights", "not a list of numbers", got=weights, expected="e.g. [0.299, 0.587, 0.114]")
        self.weights = tuple(expect_float(w, f"weights[{i}]") for i, w in enumerate(weights))
        self.remove_rank = expect_bool(remove_rank, "remove_rank")
        self._weights = np.asarray(self.weights, dtype=np.float32)

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not shape or shape[-1] != len(self.weights):
            raise ValueError(f"the last axis must hold the {len(self.weights)} color channels that 'weights' weighs")
        return shape[:-1] if self.remove_rank else (*shape[:-1], 1)

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        gray = _float(batch) @ self._weights
        return gray if self.remove_rank else gray[..., None]


class ImageResize(Preprocessor):
    """Bilinear resize of images ``(height, width)`` or ``(height, width, channels)`` to ``(height, width[,
    channels])`` with Pillow (per channel, in float32; downscaling averages over the covered pixels)."""

    def __init__(self, *, width: int, height: int) -> None:
        self.width = expect_int(width, "width", minimum=1)
        self.height = expect_int(height, "height", minimum=1)

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) not in (2, 3):
            raise ValueError("images must have shape (height, width) or (height, width, channels)")
        return (self.height, self.width, *shape[2:])

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        from PIL import Image

        batch = _float(batch)
        if batch.shape[1:3] == (self.height, self.width):
            return batch
        planes = batch[..., None] if batch.ndim == 3 else batch
        resized = np.empty((len(batch), self.height, self.width, planes.shape[-1]), dtype=np.float32)
        for index in range(len(batch)):
            for channel in range(planes.shape[-1]):
                image = Image.fromarray(np.ascontiguousarray(planes[index, :, :, channel]))
                image = image.resize((self.width, self.height), Image.Resampling.BILINEAR)
                resized[index, :, :, channel] = np.asarray(image)
        return resized[..., 0] if batch.ndim == 3 else resized


class Divide(Preprocessor):
    """``x / scale`` (e.g. ``scale=255`` for byte images)."""

    def __init__(self, *, scale: float) -> None:
        self.scale = expect_float(scale, "scale")
        if self.scale == 0.0:
            raise SpecError("scale", "cannot divide by zero", got=scale)

    def processed_bounds(self, low: float | None, high: float | None) -> Bounds:
        if low is None or high is None:
            return None, None
        lowest, highest = sorted((low / self.scale, high / self.scale))
        return lowest, highest

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        return (_float(batch) / np.float32(self.scale)).astype(np.float32, copy=False)


class Clip(Preprocessor):
    """``clip(x, min_value, max_value)``, keeping the dtype (int states stay int)."""

    produces_float = False

    def __init__(self, *, min_value: float, max_value: float) -> None:
        self.min_value = expect_float(min_value, "min_value", finite=False)  # -inf/inf: no bound on that side
        self.max_value = expect_float(max_value, "max_value", finite=False)
        if not self.min_value < self.max_value:
            raise SpecError(
                "max_value", "must be above min_value", got={"min_value": min_value, "max_value": max_value}
            )

    def processed_bounds(self, low: float | None, high: float | None) -> Bounds:
        low = self.min_value if low is None else max(low, self.min_value)
        high = self.max_value if high is None else min(high, self.max_value)
        return low, high

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        batch = np.asarray(batch)
        return np.clip(batch, self.min_value, self.max_value).astype(batch.dtype, copy=False)


class Flatten(Preprocessor):
    """``[B, *shape] -> [B, prod(shape)]``."""

    produces_float = False

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (math.prod(shape),)

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        batch = np.asarray(batch)
        return batch.reshape(len(batch), -1)


class ExpandDims(Preprocessor):
    """Inserts an axis of size 1 at ``axis`` of the state shape (negative counts from the end: -1 appends)."""

    produces_float = False

    def __init__(self, *, axis: int) -> None:
        self.axis = expect_int(axis, "axis")

    def processed_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not -len(shape) - 1 <= self.axis <= len(shape):
            raise ValueError(f"axis {self.axis} is outside [{-len(shape) - 1}, {len(shape)}] for this shape")
        position = self.axis if self.axis >= 0 else len(shape) + 1 + self.axis
        return (*shape[:position], 1, *shape[position:])

    def process(self, batch: np.ndarray, rows: Any = None) -> np.ndarray:
        return np.expand_dims(np.asarray(batch), self.axis + 1 if self.axis >= 0 else self.axis)


class PreprocessorStack:
    """The steps for one state (or the reward), applied in order.

    ``unprocessed_spec`` is what the environment gives, ``processed_spec`` what comes out (shape replaced; type
    float after a value-computing step; bounds where known).
    """

    def __init__(self, preprocessors: list[Preprocessor], spec: StateSpec) -> None:
        self.preprocessors = list(preprocessors)
        self.unprocessed_spec = spec
        self.processed_spec = spec
        for preprocessor in self.preprocessors:
            self.processed_spec = processed_spec(preprocessor, self.processed_spec)

    def process(self, batch: np.ndarray, rows: Any = None, *, frozen: bool = False) -> np.ndarray:
        """The steps in order; ``frozen``: their ``process_frozen``, which learns no statistics (independent acting,
        evaluation)."""
        batch = np.asarray(batch)
        if batch.shape[1:] != self.unprocessed_spec.shape:
            raise ValueError(
                f"preprocessing of '{self.unprocessed_spec.name}' expects a batch of shape "
                f"[B, {', '.join(map(str, self.unprocessed_spec.shape))}], got {list(batch.shape)}"
            )
        for preprocessor in self.preprocessors:
            batch = preprocessor.process_frozen(batch, rows) if frozen else preprocessor.process(batch, rows)
        return batch

    def reset(self, rows: Any = None) -> None:
        for preprocessor in self.preprocessors:
            preprocessor.reset(rows)

    def start_episodes(self, rows: Any = None) -> None:
        """The reward stack's episode starts (see ``Preprocessor.start_episodes``)."""
        for preprocessor in self.preprocessors:
            preprocessor.start_episodes(rows)

    def apart(self) -> PreprocessorStack:
        """The stack for acting apart from the training rows: each step's ``apart`` (the steps it shares with this
        stack are this stack's: restart only the others' episodes)."""
        stack = copy.copy(self)
        stack.preprocessors = [preprocessor.apart() for preprocessor in self.preprocessors]
        return stack

    @property
    def keeps_episode_state(self) -> bool:
        """Whether a step keeps per-episode state (see ``Preprocessor.keeps_episode_state``)."""
        return any(preprocessor.keeps_episode_state for preprocessor in self.preprocessors)

    def state_dict(self) -> dict[str, Any]:
        return {str(index): preprocessor.state_dict() for index, preprocessor in enumerate(self.preprocessors)}

    def run_wide_loads(self, state: Mapping[str, Any]) -> list[tuple[Preprocessor, dict[str, Any]]]:
        """From the ``state`` of a stack of the same steps (``state_dict``), what its steps learned over a whole run:
        (step, the state dict to load into it) for ``running_standardize`` without ``reset_after_batch`` (its
        statistics) and ``running_return_scale`` (its statistics; each row's return starts at zero). What a warm
        start keeps: the networks it loads were trained on states and rewards these statistics scaled."""
        loads: list[tuple[Preprocessor, dict[str, Any]]] = []
        for index, step in enumerate(self.preprocessors):
            saved = dict(state[str(index)])
            if isinstance(step, RunningStandardize):
                # statistics of the whole run are one count, per-episode ones one per row (None: none yet)
                saved_run_wide = saved["count"] is not None and np.ndim(saved["count"]) == 0
                saved_per_row = saved["count"] is not None and np.ndim(saved["count"]) > 0
                if saved_per_row and not step.reset_after_batch or saved_run_wide and step.reset_after_batch:
                    there, here = ("per episode", "over the run") if saved_per_row else ("over the run", "per episode")
                    raise ValueError(
                        f"the checkpoint's running_standardize (step {index} of '{self.unprocessed_spec.name}') kept "
                        f"its statistics {there}, this one keeps them {here} (reset_after_batch)"
                    )
                if saved_run_wide:
                    loads.append((step, saved))
            elif isinstance(step, RunningReturnScale):
                loads.append((step, {**saved, "returns": []}))
        return loads

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state) != len(self.preprocessors):
            raise ValueError(f"a state of {len(state)} preprocessors for a stack of {len(self.preprocessors)}")
        for index, preprocessor in enumerate(self.preprocessors):
            preprocessor.load_state_dict(state[str(index)])

    def __len__(self) -> int:
        return len(self.preprocessors)

    def __iter__(self):
        return iter(self.preprocessors)

    def __repr__(self) -> str:
        return (
            f"PreprocessorStack({self.preprocessors!r}, {self.unprocessed_spec.shape} -> {self.processed_spec.shape})"
        )


def processed_spec(preprocessor: Preprocessor, spec: StateSpec) -> StateSpec:
    """``spec`` after ``preprocessor``; raises ValueError when the step cannot process that shape."""
    shape = tuple(preprocessor.processed_shape(tuple(spec.shape)))
    low, high = preprocessor.processed_bounds(spec.min_value, spec.max_value)
    if preprocessor.produces_float:
        return replace(spec, shape=shape, type="float", num_values=None, min_value=low, max_value=high)
    return replace(spec, shape=shape, min_value=low, max_value=high)


def _type_name(entry: Any) -> Any:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        return entry.get("type")
    return None


def _with_discount(entry: Any, discount: float) -> Any:
    """``entry`` with ``discount`` when it is a ``running_return_scale`` step that names none."""
    if PREPROCESSORS.canonical(_type_name(entry)) != "running_return_scale":
        return entry
    if isinstance(entry, str):
        return {"type": entry, "discount": discount}
    return entry if "discount" in entry else {**entry, "discount": discount}


def _create(entry: Any, spec: StateSpec, path: str) -> Preprocessor:
    if _type_name(entry) == "center":
        raise SpecError(
            f"{path}.type" if isinstance(entry, Mapping) else path,
            "preprocessor 'center' was never registered in TensorForce (0.3.5 configs name it, but it never ran)",
            hint="Use 'standardize' (per instance) or 'running_standardize' (running statistics).",
        )
    if isinstance(entry, Preprocessor):
        preprocessor = copy.deepcopy(entry)  # each state gets its own (stateful steps keep per-state buffers)
    else:
        preprocessor = PREPROCESSORS.create(entry, path, base=Preprocessor)
    if not isinstance(preprocessor, Preprocessor):
        raise SpecError(path, "not a Preprocessor", got=what_it_is(preprocessor), expected="a subclass of Preprocessor")
    return preprocessor


def build_stack(spec: Any, state: StateSpec, path: str) -> PreprocessorStack:
    """The stack for one state: ``spec`` is a list of steps or one step."""
    if isinstance(spec, list):
        entries, paths = spec, [f"{path}[{i}]" for i in range(len(spec))]
    else:
        entries, paths = [spec], [path]
    preprocessors, current = [], state
    for entry, entry_path in zip(entries, paths, strict=True):
        preprocessor = _create(entry, current, entry_path)
        try:
            current = processed_spec(preprocessor, current)
        except ValueError as error:
            raise SpecError(
                entry_path,
                f"{kind_name(preprocessor)} cannot process '{state.name}' of shape {list(current.shape)}: {error}",
            ) from None
        expect_elements(
            math.prod(current.shape),
            entry_path,
            f"'{state.name}' after {kind_name(preprocessor)}, of shape {list(current.shape)},",
        )
        preprocessors.append(preprocessor)
    return PreprocessorStack(preprocessors, state)


def build_preprocessing(
    spec: Any, states: Mapping[str, StateSpec], *, path: str = "states_preprocessing"
) -> dict[str, PreprocessorStack]:
    """The preprocessing stack of each state that has one, keyed by state name.

    ``spec`` is None (``{}``), a list of steps or one ``{"type": ...}`` step (the same stack, built separately,
    for every state), or a dict ``{state_name: list or step or None}``.
    """
    if spec is None:
        return {}
    if isinstance(spec, Mapping) and "type" not in spec:
        stacks = {}
        for name, entry in spec.items():
            if name not in states:
                raise unknown_name_error(f"{path}.{name}", "state", name, states)
            if entry is not None and entry != []:
                stacks[name] = build_stack(entry, states[name], f"{path}.{name}")
        return stacks
    if spec == []:
        return {}
    return {name: build_stack(spec, state, path) for name, state in states.items()}


def build_reward_preprocessing(
    spec: Any, *, path: str = "reward_preprocessing", discount: float | None = None
) -> PreprocessorStack | None:
    """The reward's stack (rewards are scalars, batches ``[B]``), or None without a spec.

    Steps must keep the reward a scalar. Per-instance ``standardize`` and ``normalize`` turn every scalar reward
    into 0, so they warn. A ``running_return_scale`` step that leaves out its ``discount`` takes ``discount`` (the
    agent's, as rl-baselines3-zoo gives VecNormalize the algorithm's gamma) where one is given.
    """
    if spec is None or spec == []:
        return None
    if isinstance(spec, Mapping) and "type" not in spec:
        raise SpecError(path, "not a reward preprocessing spec", got=spec, expected='a list of steps or {"type": ...}')
    if discount is not None:
        spec = (
            [_with_discount(entry, discount) for entry in spec]
            if isinstance(spec, list)
            else _with_discount(spec, discount)
        )
    stack = build_stack(spec, StateSpec("reward", (), "float"), path)
    if stack.processed_spec.shape != ():
        raise SpecError(
            path,
            f"reward preprocessing must keep the reward a scalar, not make it {list(stack.processed_spec.shape)}",
            got=spec,
        )
    for preprocessor in stack:
        if isinstance(preprocessor, (Normalize, Standardize)) and not getattr(preprocessor, "across_batch", False):
            warn_spec(
                f"{path}: per-instance {kind_name(preprocessor)} maps every scalar reward to 0; use "
                "running_standardize or running_return_scale."
            )
        elif isinstance(preprocessor, (Normalize, Standardize)):
            warn_spec(
                f"{path}: {kind_name(preprocessor)} with across_batch=true works on one step's rewards at a time (one "
                "per environment), and maps the reward of a single environment to 0; use running_standardize or "
                "running_return_scale."
            )
    return stack
