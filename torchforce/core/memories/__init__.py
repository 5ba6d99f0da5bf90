"""Memories: ring buffers of named fields that agents store transitions in and retrieve batches from.

``latest`` returns the most recent rows in order (on-policy agents), ``replay`` samples uniformly and
``prioritized_replay`` samples by priority with importance-sampling weights (off-policy agents). Spec keys:
``type``, ``capacity`` (required; an agent fills in its default where a spec, or a bare name like ``"replay"``,
gives none: ``with_capacity``), ``include_next_states``, ``stacked_frames`` (keep each distinct frame of image
states once: ``frames.py``) and, for ``prioritized_replay``, ``prioritization_weight``, ``prioritization_constant``,
``importance_sampling_weight`` and ``buffer_size``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.core.memories.base import FieldSpec, Memory
from torchforce.spec import Registry

MEMORIES = Registry(
    "memory",
    {
        "latest": "torchforce.core.memories.latest:Latest",
        "replay": "torchforce.core.memories.replay:Replay",
        "prioritized_replay": "torchforce.core.memories.prioritized:PrioritizedReplay",
    },
    base=Memory,
)


def with_capacity(spec: Any, capacity: int) -> Any:
    """``spec`` with ``capacity`` filled in where it gives none (an agent's default): a dict without the key, or a
    bare memory name (``"replay"`` means ``{"type": "replay"}``). Other forms (a ready Memory, a class, a
    ``"package.module:Class"`` path) are left as they are."""
    if isinstance(spec, str) and MEMORIES.canonical(spec) is not None:
        spec = {"type": spec}
    if isinstance(spec, Mapping) and "capacity" not in spec:
        spec = {**spec, "capacity": capacity}
    return spec


def build_memory(
    spec: Any,
    fields: Mapping[str, FieldSpec],
    *,
    rng: np.random.Generator,
    path: str = "memory",
    default: str = "replay",
) -> Memory:
    """Build a memory from its spec (a name, a dict with ``type``, a class or a ready Memory) for ``fields``."""
    return MEMORIES.create(spec, path, base=Memory, default=default, fields=fields, rng=rng)


__all__ = ["MEMORIES", "FieldSpec", "Memory", "build_memory", "with_capacity"]
