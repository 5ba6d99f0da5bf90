"""The steps without statistics of a run: frame stacking (``sequence``), standardization and normalization of each
instance, image steps (grayscale, resize), scaling, clipping and reshaping."""

from __future__ import annotations

import collections.abc
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.core.preprocessors.base import EPSILON, Bounds, Preprocessor, row_indices
from torchforce.spec import SpecError, expect_bool, expect_float, expect_int


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
