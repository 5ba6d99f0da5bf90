"""Values that follow training's progress (ours: 2018's optimizers and PPO took constants): a learning rate or a
clipping range that falls over the run, as SB3's ``lin_2.5e-4`` and CleanRL's ``--anneal-lr`` do.

Where a spec accepts a schedule, a number is a constant and ``{"type": "linear", "initial": a, "final": b,
"timesteps": T}`` goes in a straight line from a at timestep 0 to b at timestep T, and stays at b after it. The
timestep is the model's count of timesteps (``Agent.model_timestep``: all rows of a vectorized agent; all acts of
the threaded workers that share one model; a worker's own in distributed runs), read at each update (an
exploration's, at each act), so a restored agent continues the schedule exactly where it was.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from torchforce.spec import SpecError, expect_float
from torchforce.spec.checks import MAX_TIMESTEP, expect_limited_int

SCHEDULE_KEYS = ("type", "initial", "final", "timesteps")


@dataclass(frozen=True)
class Schedule:
    """``value(timestep)``: ``initial`` at timestep 0, ``final`` from ``timesteps`` on, a straight line between
    (``timesteps`` 0: a constant)."""

    initial: float
    final: float
    timesteps: int = 0

    @property
    def constant(self) -> bool:
        return self.timesteps == 0 or self.initial == self.final

    def value(self, timestep: int) -> float:
        if self.constant or timestep >= self.timesteps:
            return self.final
        return self.initial + (self.final - self.initial) * (timestep / self.timesteps)


def build_schedule(spec: Any, path: str, *, minimum: float = 0.0, positive: bool = False) -> Schedule:
    """A schedule from a number or a ``linear`` spec, each value at least ``minimum``; ``positive``: the value a
    run starts with must be above ``minimum`` (a learning rate may fall to 0, but not start there)."""

    def number(value: Any, where: str, first: bool) -> float:
        result = expect_float(value, where, minimum=minimum)
        if first and positive and result <= minimum:
            raise SpecError(where, f"must be above {minimum:g}", got=value)
        return result

    if isinstance(spec, numbers.Real) and not isinstance(spec, bool):
        value = number(spec, path, True)
        return Schedule(value, value)
    if not isinstance(spec, dict):
        raise SpecError(
            path,
            "not a number or a schedule",
            got=spec,
            expected='a number, or {"type": "linear", "initial": ..., "final": ..., "timesteps": ...}',
        )
    for key in spec:
        if key not in SCHEDULE_KEYS:
            raise SpecError(f"{path}.{key}", "unknown key for a schedule", hint="Accepted: " + ", ".join(SCHEDULE_KEYS))
    if spec.get("type") != "linear":
        raise SpecError(f"{path}.type", "unknown schedule type", got=spec.get("type"), expected='"linear"')
    for key in ("initial", "final", "timesteps"):
        if key not in spec:
            raise SpecError(f"{path}.{key}", "missing", hint="A linear schedule needs initial, final and timesteps.")
    return Schedule(
        number(spec["initial"], f"{path}.initial", True),
        number(spec["final"], f"{path}.final", False),
        expect_limited_int(spec["timesteps"], f"{path}.timesteps", minimum=1, maximum=MAX_TIMESTEP),
    )
