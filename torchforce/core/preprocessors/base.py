"""The preprocessor step's base class and what every step shares: the row indices of a batch, the epsilon of a
standard deviation's floor, the registry-style name of a step."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

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
