"""Frequencies as the 2018 client writes them: ``"600s"`` (seconds), ``"5000t"`` (timesteps), ``"100e"`` (episodes).

A bare number (``600`` or ``"600"``) means seconds, as in tensorforce-client's ``^(\\d+)([ste])?$``, and warns: the
2018 documentation always wrote the unit, and a user who writes ``50000`` for an evaluation every 50k steps would
otherwise wait 14 hours for it. ``Every`` is the timer that every saver uses (the agent's ``saver``, the
ThreadedRunner's ``save_frequency``, the client worker's ``saver_frequency``): due once a frequency has passed since
it was last marked.
"""

from __future__ import annotations

import numbers
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from torchforce.spec.errors import SpecError, warn_spec

Unit = Literal["seconds", "timesteps", "episodes"]
UNITS: dict[str, Unit] = {"s": "seconds", "t": "timesteps", "e": "episodes"}
PATTERN = re.compile(r"(\d+)([ste]?)", re.ASCII)
EXPECTED = "a whole number and a unit, like '600s', '100e' or '5000t'"
UNIT_HINT = "Units: s = seconds, t = timesteps, e = episodes; a bare number means seconds."
# Units people reach for that the format lacks, in seconds.
OTHER_UNITS = {"m": 60, "min": 60, "h": 3600}


@dataclass(frozen=True)
class Frequency:
    """Every ``amount`` ``unit``: ``Frequency(600, "seconds")``."""

    amount: int
    unit: Unit

    def __str__(self) -> str:
        return f"{self.amount}{self.unit[0]}"


def parse_frequency(value: Any, path: str) -> Frequency:
    """A Frequency from ``"600s"``, ``"100e"``, ``"5000t"``, ``600``/``"600"`` (seconds) or a Frequency.

    The amount must be at least 1; anything else is a SpecError naming ``path``. A bare number warns (a
    SpecWarning) that it means seconds.
    """
    if isinstance(value, Frequency):
        amount, unit = value.amount, value.unit
    elif isinstance(value, str):
        match = PATTERN.fullmatch(value)
        if match is None:
            raise SpecError(path, "not a frequency", got=value, expected=EXPECTED, hint=_hint(value))
        amount, unit = int(match.group(1)), UNITS[match.group(2) or "s"]
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
        amount, unit = int(value), "seconds"  # type: ignore[call-overload]  # as in checks.expect_int
    else:
        raise SpecError(path, "not a frequency", got=value, expected=EXPECTED, hint=UNIT_HINT)
    if unit not in UNITS.values():
        raise SpecError(path, "unknown frequency unit", got=unit, expected="'seconds', 'timesteps' or 'episodes'")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
        raise SpecError(path, "out of range", got=value, expected="an amount of at least 1, like '600s'")
    if not isinstance(value, Frequency) and not str(value)[-1:].isalpha():  # no unit: seconds
        warn_spec(
            f"{path}: {value!r} has no unit, so it means every {_duration(amount)}; write "
            f"'{amount}s' to say so, or '{amount}t' for timesteps, '{amount}e' for episodes"
        )
    return value if isinstance(value, Frequency) else Frequency(amount, unit)


def _duration(seconds: int) -> str:
    """``seconds``, and past a minute the same in the largest unit that keeps it at least 1: '30 seconds',
    '600 seconds (10 minutes)', '50000 seconds (13.9 hours)'."""
    for size, name in ((86400, "days"), (3600, "hours"), (60, "minutes")):
        if seconds >= size:
            amount = f"{seconds / size:,.1f}".removesuffix(".0")
            return f"{seconds} seconds ({amount} {name.removesuffix('s') if amount == '1' else name})"
    return f"{seconds} second{'s' if seconds > 1 else ''}"


def _hint(text: str) -> str:
    """What to write instead of ``text``: the same count in seconds for minutes/hours, lower case for ``600S``."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        if unit.lower() in OTHER_UNITS:
            return f"There is no '{unit}' unit; write '{amount * OTHER_UNITS[unit.lower()]}s'."
        if unit.lower() in UNITS or unit == "":
            return f"Write '{amount}{unit.lower() or 's'}'."
    return UNIT_HINT


class Every:
    """Due every ``timesteps`` timesteps, ``seconds`` seconds or ``episodes`` episodes (whichever comes first when
    several are given; None: not by that unit), counted from the last ``mark``. Seconds are ``time.monotonic()``'s.
    The first mark is at timestep 0, episode 0, now."""

    def __init__(
        self, *, timesteps: float | None = None, seconds: float | None = None, episodes: float | None = None
    ) -> None:
        self.amounts = {"timesteps": timesteps, "seconds": seconds, "episodes": episodes}
        self.mark()

    @classmethod
    def of(cls, frequency: Frequency) -> Every:
        """Every ``frequency`` (a parsed ``"600s"``, ``"100e"``...)."""
        return cls(**{frequency.unit: frequency.amount})

    def mark(self, timestep: int = 0, episode: int = 0, now: float | None = None) -> None:
        """Count from here: ``timestep``, ``episode`` and ``now`` (default: ``time.monotonic()``)."""
        self.last = {"timesteps": timestep, "episodes": episode, "seconds": time.monotonic() if now is None else now}

    def due(self, timestep: int = 0, episode: int = 0, now: float | None = None) -> bool:
        """Whether a frequency has passed since the last ``mark``."""
        current = {"timesteps": timestep, "episodes": episode}
        for unit, amount in self.amounts.items():
            if amount is None:
                continue
            if unit == "seconds":
                value = time.monotonic() if now is None else now
            else:
                value = current[unit]
            if value - self.last[unit] >= amount:
                return True
        return False
