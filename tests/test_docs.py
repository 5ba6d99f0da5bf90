"""References resolve inside the repository.

Code and docs point at documentation as ``docs/<file>.md`` or ``docs/<file>.md, <Section>``, where <Section> is
the name of one of that file's headings, possibly quoted (any level; a heading's trailing parenthesis, such as a
module path, is not part of its name). Every such reference in ``torchforce/``, ``tests/``, ``docs/`` and the
README must name an existing file and heading. No file points to documents outside the
repository (the seed documents and the reference notes the project was written from).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# "docs/<file>.md", optionally followed by ", <Section>"; a reference may wrap onto the next comment line
REFERENCE = re.compile(r"docs/(?P<file>[\w.-]+\.md)(?:,\s+(?P<rest>[^\n]*))?")
CONTINUATION = re.compile(r"\n[ \t]*(?:#[ \t]*)?")
HEADING = re.compile(r"^#{1,6}\s+(?P<name>.+?)\s*$")
TRAILING_PARENTHESIS = re.compile(r"\s*\([^()]*\)$")
# Pointers to documents that are not in the repository (spelled in pieces so this file does not match itself).
OUTSIDE = re.compile(
    "|".join(
        [
            r"seed[ -]0" + r"0\d",
            r"seeds' default",
            r"reference " + "\N{SECTION SIGN}",
            "\N{SECTION SIGN}" + r"\s*\d",
            r"reference section \d",
            r"shared/(?:reference|seeds)",
            r"\bSTYLE" + r"\.md",
            r"\bARCHITECTURE" + r"\.md",
        ]
    )
)


def headings(path: Path) -> list[str]:
    """The names of a Markdown file's headings, outside code blocks, without a trailing parenthesis."""
    names, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            names.append(TRAILING_PARENTHESIS.sub("", match["name"]).strip())
    return names


def sources() -> list[Path]:
    files = [ROOT / "README.md", *DOCS.glob("*.md")]
    for folder in ("torchforce", "tests"):
        files += (ROOT / folder).rglob("*.py")
    return sorted(path for path in files if path.resolve() != Path(__file__).resolve())


# Every source: none points to documents outside the repository.
CLEANED = tuple(str(path.relative_to(ROOT)) for path in sources())


def references() -> list[tuple[str, str, str | None]]:
    """``(where, file, rest)`` for every reference: ``rest`` is the text after ``docs/<file>.md, `` (None when the
    reference names no section). Lines a reference wraps onto are joined first."""
    found = []
    for path in sources():
        text = CONTINUATION.sub(" ", path.read_text(encoding="utf-8"))
        for match in REFERENCE.finditer(text):
            rest = match["rest"]
            if rest is not None:
                rest = rest.lstrip("\"'")  # a section name may be quoted
                if rest.startswith(("docs/", "<")):
                    rest = None  # a list of files, or the placeholder that describes the convention
            found.append((str(path.relative_to(ROOT)), match["file"], rest))
    return found


def names_a_heading(rest: str, names: list[str]) -> bool:
    """Whether ``rest`` begins with one of ``names``, followed by the end or by something other than a letter or
    digit (``Runner)`` names Runner; ``Runners`` does not)."""
    return any(rest.startswith(name) and (len(rest) == len(name) or not rest[len(name)].isalnum()) for name in names)


def test_references_are_found() -> None:
    found = {(file, rest.split(")")[0] if rest else None) for _, file, rest in references()}
    assert ("tensorforce-0.4.md", "Runner") in found  # execution/runner.py's docstring: the scan sees it


def test_every_docs_reference_names_an_existing_file_and_heading() -> None:
    broken = []
    for where, file, rest in references():
        path = DOCS / file
        if not path.is_file():
            broken.append(f"{where}: docs/{file} does not exist")
        elif rest is not None and not names_a_heading(rest, headings(path)):
            broken.append(f"{where}: docs/{file} has no heading that starts {rest[:40]!r}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("file", sorted(path.name for path in DOCS.glob("*.md")))
def test_headings_are_unique(file: str) -> None:
    names = headings(DOCS / file)
    assert len(names) == len(set(names)), sorted({name for name in names if names.count(name) > 1})


@pytest.mark.parametrize("file", CLEANED)
def test_no_reference_to_documents_outside_the_repository(file: str) -> None:
    text = (ROOT / file).read_text(encoding="utf-8")
    hits = [f"{file}:{text.count(chr(10), 0, match.start()) + 1}: {match[0]}" for match in OUTSIDE.finditer(text)]
    assert not hits, "\n".join(hits)
