"""Reading spec files (JSON or YAML) into plain data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchforce.spec.errors import SpecError

SUFFIXES = (".json", ".yaml", ".yml")


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # only when a YAML file is read

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError("", f"malformed YAML{where}: {problem}", file=str(path)) from None


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError(
            "", f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}", file=str(path)
        ) from None


def load_file(file: str | Path) -> Any:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) spec file; a malformed file raises SpecError.

    Any other suffix is read as JSON.
    """
    path = Path(file)
    if not path.is_file():
        what = "is a directory, not a spec file" if path.is_dir() else "spec file not found"
        raise SpecError("", f"{what}: {path}", hint="Check the path, or name a config the project ships.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        bad = error.object[error.start]
        raise SpecError("", f"not UTF-8 text: byte 0x{bad:02x} at offset {error.start}", file=str(path)) from None
    except OSError as error:
        raise SpecError("", f"cannot read the spec file: {error.strerror or error}", file=str(path)) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _parse_yaml(text, path)
    return _parse_json(text, path)


def load_spec(source: Any) -> tuple[Any, str | None]:
    """A spec from a file path, or the data itself. Returns the data and the file it came from (or None).

    A ``Path``, or a string ending in ``.json``/``.yaml``/``.yml``, is a file; anything else is the spec itself.
    """
    if isinstance(source, Path) or (isinstance(source, str) and source.lower().endswith(SUFFIXES)):
        return load_file(source), str(source)
    return source, None
