"""Frequencies as the 2018 client writes them: ``"600s"`` (seconds), ``"5000t"`` (timesteps), ``"100e"`` (episodes).

A bare number (``600`` or ``"600"``) means seconds, as in tensorforce-client's ``^(\\d+)([ste])?$``.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Any, Literal

from torchforce.spec.errors import SpecError

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

    The amount must be at least 1; anything else is a SpecError naming ``path``.
    """
    if isinstance(value, Frequency):
        amount, unit = value.amount, value.unit
    elif isinstance(value, str):
        match = PATTERN.fullmatch(value)
        if match is None:
            raise SpecError(path, "not a frequency", got=value, expected=EXPECTED, hint=_hint(value))
        amount, unit = int(match.group(1)), UNITS[match.group(2) or "s"]
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
        amount, unit = int(value), "seconds"
    else:
        raise SpecError(path, "not a frequency", got=value, expected=EXPECTED, hint=UNIT_HINT)
    if unit not in UNITS.values():
        raise SpecError(path, "unknown frequency unit", got=unit, expected="'seconds', 'timesteps' or 'episodes'")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
        raise SpecError(path, "out of range", got=value, expected="an amount of at least 1, like '600s'")
    return value if isinstance(value, Frequency) else Frequency(amount, unit)


def _hint(text: str) -> str:
    """What to write instead of ``text``: the same count in seconds for minutes/hours, lower case for ``600S``."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        if unit.lower() in OTHER_UNITS:
            return f"There is no '{unit}' unit; write '{amount * OTHER_UNITS[unit.lower()]}s'."
        if unit.lower() in UNITS or unit == "":
            return f"Write '{amount}{unit.lower()}'."
    return UNIT_HINT
