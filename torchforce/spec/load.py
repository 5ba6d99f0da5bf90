"""Reading spec files (JSON or YAML) into plain data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchforce.spec.errors import SpecError


def load_file(file: str | Path) -> Any:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) spec file; a malformed file raises SpecError."""
    path = Path(file)
    if not path.is_file():
        raise SpecError("", f"spec file not found: {path}", hint="Check the path, or name a config the project ships.")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise SpecError("", f"malformed YAML{where}: {getattr(error, 'problem', error)}", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError(
            "", f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}", file=str(path)
        ) from None


def load_spec(source: Any) -> tuple[Any, str | None]:
    """A spec from a file path, or the data itself. Returns the data and the file it came from (or None)."""
    if isinstance(source, Path) or (isinstance(source, str) and source.lower().endswith((".json", ".yaml", ".yml"))):
        return load_file(source), str(source)
    return source, None
