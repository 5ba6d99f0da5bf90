"""When an agent updates: the 2018 ``update_mode`` spec and a schedule that counts what has been stored.

2018 triggered on ``timestep % frequency == 0``; with many parallel environments the counters jump by the number
of rows, so the schedule keeps a "next update at" threshold instead and reports how many thresholds were crossed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchforce.spec import SpecError, did_you_mean, expect_choice, expect_dict, expect_int

UNITS = ("timesteps", "episodes", "sequences")
KEYS = ("unit", "batch_size", "frequency", "length", "first_update")


@dataclass(frozen=True)
class UpdateMode:
    unit: str
    batch_size: int
    frequency: int
    length: int = 8
    first_update: int = 0

    @classmethod
    def from_spec(cls, spec: Any, default: dict[str, Any], path: str = "update_mode") -> UpdateMode:
        merged = dict(default if spec is None else expect_dict(spec, path))
        for key in merged:
            if key not in KEYS:
                guess = did_you_mean(key, KEYS)
                raise SpecError(f"{path}.{key}", "unknown key", hint=f"Did you mean '{guess}'?" if guess else None)
        if "batch_size" not in merged:
            raise SpecError(path, "needs 'batch_size'", got=merged)
        unit = expect_choice(merged.get("unit", default.get("unit")), f"{path}.unit", UNITS)
        batch_size = expect_int(merged["batch_size"], f"{path}.batch_size", minimum=1)
        frequency = expect_int(merged.get("frequency", batch_size), f"{path}.frequency", minimum=1)
        length = expect_int(merged.get("length", 8), f"{path}.length", minimum=1)
        first_update = expect_int(merged.get("first_update", 0), f"{path}.first_update", minimum=0)
        return cls(unit, batch_size, frequency, length, first_update)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "batch_size": self.batch_size,
            "frequency": self.frequency,
            "length": self.length,
            "first_update": self.first_update,
        }


class Schedule:
    """Counts stored timesteps or episodes and says how many updates are due."""

    def __init__(self, mode: UpdateMode) -> None:
        self.mode = mode
        needed = max(mode.batch_size + (mode.length - 1 if mode.unit == "sequences" else 0), mode.first_update, 1)
        self.next_at = -(-needed // mode.frequency) * mode.frequency  # first multiple of frequency >= needed

    def due(self, count: int) -> int:
        """The number of updates due now that ``count`` units are stored; advances the threshold past them."""
        if count < self.next_at:
            return 0
        crossed = (count - self.next_at) // self.mode.frequency + 1
        self.next_at += crossed * self.mode.frequency
        return crossed

    def state_dict(self) -> dict[str, int]:
        return {"next_at": self.next_at}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.next_at = int(state["next_at"])
