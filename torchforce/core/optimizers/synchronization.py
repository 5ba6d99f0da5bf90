"""Target-network synchronization (the 2018 ``synchronization`` optimizer), used by DQN, NAF, DQfD and DDPG."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor

from torchforce.spec import Registry, SpecError, check_kwargs, expect_float, expect_int


class Synchronization:
    """Moves ``target`` towards ``source``: ``target += update_weight * (source - target)``.

    ``sync(time)`` does so when ``time - last_sync >= sync_frequency`` and then sets ``last_sync = time``;
    ``last_sync`` starts at ``-sync_frequency``, so the first call syncs. ``update_weight = 1`` is a hard copy,
    a small weight a soft (Polyak) update. ``time`` is the model's timestep (``Agent.update_timestep``), as in 2018:
    the agent's count of acts, or, for workers sharing the model and so this object, the count of all their acts.
    """

    def __init__(
        self,
        source: Iterable[Tensor],
        target: Iterable[Tensor],
        *,
        sync_frequency: int = 1,
        update_weight: float = 1.0,
    ) -> None:
        self.source = list(source)
        self.target = list(target)
        if len(self.source) != len(self.target):
            raise ValueError(f"source has {len(self.source)} tensors but target has {len(self.target)}")
        for index, (source_tensor, target_tensor) in enumerate(zip(self.source, self.target, strict=True)):
            if source_tensor.shape != target_tensor.shape:
                raise ValueError(
                    f"tensor {index}: source shape {tuple(source_tensor.shape)} != target {tuple(target_tensor.shape)}"
                )
        self.sync_frequency = expect_int(sync_frequency, "sync_frequency", minimum=1)
        self.update_weight = expect_float(update_weight, "update_weight", maximum=1.0)
        if self.update_weight <= 0.0:
            raise SpecError("update_weight", "out of range", got=update_weight, expected="a number in (0, 1]")
        self.last_sync = -self.sync_frequency

    def sync(self, time: int) -> bool:
        """Update the target if ``sync_frequency`` has passed since the last update; True when it did."""
        if time - self.last_sync < self.sync_frequency:
            return False
        self.apply()
        self.last_sync = time
        return True

    @torch.no_grad()
    def apply(self) -> None:
        """Update the target now (``target += update_weight * (source - target)``), leaving the schedule alone."""
        for source_tensor, target_tensor in zip(self.source, self.target, strict=True):
            if self.update_weight == 1.0:
                target_tensor.copy_(source_tensor)
            else:
                target_tensor.lerp_(source_tensor.to(target_tensor.dtype), self.update_weight)

    def state_dict(self) -> dict[str, Any]:
        return {"last_sync": self.last_sync}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.last_sync = int(state["last_sync"])


SYNCHRONIZATIONS = Registry(
    "synchronization",
    {"synchronization": "torchforce.core.optimizers.synchronization:Synchronization"},
    base=Synchronization,
)


def build_synchronization(
    spec: Any, source: Iterable[Tensor], target: Iterable[Tensor], *, path: str = "synchronization"
) -> Synchronization:
    """A ``Synchronization`` from ``{"type": "synchronization", "sync_frequency": ..., "update_weight": ...}``
    (``type`` optional), ``"synchronization"`` or a ready instance."""
    if isinstance(spec, Synchronization):
        return spec
    name, kwargs = SYNCHRONIZATIONS.split(spec, path, default="synchronization")
    target_class = SYNCHRONIZATIONS.get(name, f"{path}.type" if isinstance(spec, Mapping) else path)
    check_kwargs(target_class, kwargs, path, provided=("source", "target"))
    try:
        return target_class(source, target, **kwargs)
    except SpecError as error:
        raise error.under(path) from None
