"""The shape the code keeps: no module imports a private name from another, no agent's file imports another
agent's, ruff format owns the layout (no markers that skip it), and no library module grows past STYLE's ~600
lines (those still past it may only shrink)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from torchforce.agents import AGENTS

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(path for folder in ("torchforce", "tests", "bench") for path in (ROOT / folder).rglob("*.py"))
LONGEST_MODULE = 600  # lines: past this, a module of the library wants splitting (the style guide: no god-files)
# The library's modules still past it, each at most as long as on 2026-12-07: lower a number when a module
# shrinks, and take it off the list once it is within LONGEST_MODULE; never raise one.
LONGER_MODULES = {
    "torchforce/agents/agent.py": 1044,  # the Agent API: act/observe, updates, saving
}


def imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of every ``from torchforce... import name`` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torchforce"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, "") for alias in node.names if alias.name.startswith("torchforce")]
    return found


def test_no_module_imports_a_private_name_from_another():
    private = [
        f"{path.relative_to(ROOT)}:{line} {module}.{name}"
        for path in SOURCES
        for line, module, name in imports(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_no_agent_file_imports_another_agent_file():
    agent_modules = {AGENTS.table[name].split(":")[0] for name in AGENTS.names()}
    assert len(agent_modules) == 10
    crossing = []
    for module in sorted(agent_modules):
        path = ROOT / (module.replace(".", "/") + ".py")
        for line, imported, name in imports(path):
            target = f"{imported}.{name}" if f"{imported}.{name}" in agent_modules else imported
            if target in agent_modules and target != module:
                crossing.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert crossing == []


@pytest.mark.parametrize("marker", ["# fmt" + ": skip", "# fmt" + ": off"])  # in pieces: not a marker here
def test_ruff_format_owns_the_layout(marker):
    assert [str(path.relative_to(ROOT)) for path in SOURCES if marker in path.read_text(encoding="utf-8")] == []


def test_no_library_module_grows_past_its_length():
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in SOURCES
        if path.is_relative_to(ROOT / "torchforce")
    }
    too_long = {name: length for name, length in lengths.items() if length > LONGER_MODULES.get(name, LONGEST_MODULE)}
    described = ", ".join(f"{name} {length} lines" for name, length in too_long.items())
    assert too_long == {}, f"split the module (no god-files): {described}"
    within = [name for name, ceiling in LONGER_MODULES.items() if lengths.get(name, 0) <= LONGEST_MODULE]
    assert within == [], "within LONGEST_MODULE now: take it off LONGER_MODULES"
