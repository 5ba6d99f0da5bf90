"""How commands print: tables for lists, JSON where scripts read, short durations, paths relative to here."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

BLANK = "-"


def print_json(data: Any) -> None:
    """``data`` as JSON on standard output; NaN and infinities (which JSON has not) as null."""
    json.dump(_finite(data), sys.stdout, indent=2, default=str, allow_nan=False)
    sys.stdout.write("\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table: text left-aligned, numbers right-aligned; a missing value (None) shows as "-" and
    does not stop its column from being numeric."""
    cells = [[(BLANK if value is None else str(value)) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    numeric = []
    for i in range(len(headers)):
        present = [row[i] for row in cells if row[i] != BLANK]
        numeric.append(bool(present) and all(_is_number(value) for value in present))

    def line(values: list[str]) -> str:
        aligned = (v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True))
        return "  ".join(aligned).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(row) for row in cells]).rstrip()


def _is_number(value: str) -> bool:
    digits = value.replace(",", "").replace(".", "").replace("%", "").removeprefix("-")
    return digits.isdigit()


def elapsed(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def relative(path: Path) -> str:
    """``path`` relative to the current folder where it is under it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
