"""Reading spec files (JSON or YAML) into plain data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchforce.spec.errors import SpecError

SUFFIXES = (".json", ".yaml", ".yml")


# Limits on what a spec file may hold (issue 7, "Hardening"): a spec needs a few levels of nesting and a few
# hundred values, so these only refuse files that would hang or crash the reader. YAML aliases (``*name``) repeat a
# value without copying it; a 400-byte file of aliases of aliases ("billion laughs") stands for 10^9 values, which
# every later walk over the spec (validation, error messages, json.dumps) would expand.
MAX_DEPTH = 100  # lists and objects within each other
MAX_YAML_VALUES = 100_000  # values a YAML file may stand for once its aliases are expanded


def _too_deep(path: Path, where: str = "") -> SpecError:
    return SpecError(
        "",
        f"nested too deeply{where}: lists and objects more than {MAX_DEPTH} levels within each other",
        expected=f"a nesting depth of at most {MAX_DEPTH}",
        file=str(path),
    )


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and dicts in ``value`` nest more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # only when a YAML file is read

    loader = _bounded_loader(yaml)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, path)
        return loader.construct_document(node)
    except SpecError:
        raise
    except _TooDeep as error:
        raise _too_deep(path, f" at line {error.mark.line + 1}" if error.mark else "") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError("", f"malformed YAML{where}: {problem}", file=str(path)) from None
    except (ValueError, OverflowError) as error:  # a value its tag cannot hold: !!timestamp 2001-13-45
        raise SpecError("", f"a value in the YAML cannot be read: {error}", file=str(path)) from None
    finally:
        loader.dispose()


class _TooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        super().__init__()
        self.mark = mark


def _bounded_loader(yaml: Any) -> type:
    """yaml's SafeLoader refusing nesting deeper than MAX_DEPTH while it composes (its composer recurses)."""

    class BoundedLoader(yaml.SafeLoader):
        depth = 0

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            """A key written twice in one mapping is an error (YAML says keys are unique; PyYAML kept the last)."""
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.id != "scalar" or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"the key {key_node.value!r} is given twice (lines {seen[key_node.value]} and "
                        f"{line}); which one was meant?",
                        key_node.start_mark,
                    )
                seen[key_node.value] = line
            return super().construct_mapping(node, deep)

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _TooDeep(getattr(self.peek_event(), "start_mark", None))
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def _check_expansion(root: Any, path: Path) -> None:
    """Refuse a YAML document whose aliases make it stand for more than MAX_YAML_VALUES values, nest more than
    MAX_DEPTH levels, or contain itself. The composed nodes form a graph (an alias is the anchored node itself), so
    each node's expanded size and depth are counted once, bottom-up, without expanding anything."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: meeting one again is a cycle
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        children = _children(node)
        if finished:
            size[id(node)] = 1 + sum(size[id(child)] for child in children)
            depth[id(node)] = 1 + max((depth[id(child)] for child in children), default=0)
            open_nodes.discard(id(node))
            continue
        if id(node) in size:
            continue
        if id(node) in open_nodes:
            mark = getattr(node, "start_mark", None)
            raise SpecError(
                "",
                "a YAML alias refers to a value that contains it" + (f" (line {mark.line + 1})" if mark else ""),
                expected="values that do not contain themselves",
                file=str(path),
            )
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in size)
    total = size[id(root)]
    if total > MAX_YAML_VALUES and total > len(size):
        raise SpecError(
            "",
            f"YAML aliases expand this file to {total:,} values",
            expected=f"at most {MAX_YAML_VALUES:,}",
            hint="Write the repeated parts out, or repeat them fewer times.",
            file=str(path),
        )
    if depth[id(root)] > MAX_DEPTH:
        raise _too_deep(path, " once its YAML aliases are expanded")


def _children(node: Any) -> list[Any]:
    value = getattr(node, "value", None)
    if not isinstance(value, list):  # a scalar
        return []
    return [part for pair in value for part in pair] if node.id == "mapping" else list(value)


class _GivenTwice(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (json keeps the last of a key given twice)."""
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise _GivenTwice(key)
        value[key] = item
    return value


def _parse_json(text: str, path: Path) -> Any:
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _GivenTwice as error:
        raise SpecError(
            "", f"the key {json.dumps(error.key)} is given twice in one object; which one was meant?", file=str(path)
        ) from None
    except json.JSONDecodeError as error:
        raise SpecError(
            "", f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}", file=str(path)
        ) from None
    except RecursionError:
        raise _too_deep(path) from None
    except ValueError as error:  # a number with more digits than Python converts
        raise SpecError("", f"a value in the JSON cannot be read: {error}", file=str(path)) from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise _too_deep(path)
    return value


def load_file(file: str | Path) -> Any:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) spec file; a malformed file raises SpecError.

    Any other suffix is read as JSON.
    """
    path = Path(file)
    try:
        found = path.is_file()
        folder = not found and path.is_dir()
    except OSError as error:  # a name the system cannot look up: too long, a loop of links
        raise SpecError("", f"cannot look up the spec file: {error.strerror or error}", file=str(path)) from None
    if not found:
        what = "is a directory, not a spec file" if folder else "spec file not found"
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
