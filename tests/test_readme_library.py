"""The README's library example (its first python block, in "The library") runs exactly as written, from an empty
folder that is not the repository: nothing in it may lean on the source tree's paths, as after a plain pip install.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def library_example() -> str:
    """The README's first python block, which must be the one under "## The library"."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert match is not None, "README.md has no python block"
    assert text.rfind("\n## ", 0, match.start()) == text.find("\n## The library\n"), "not under '## The library'"
    return match.group(1)


def test_the_example_names_no_source_tree_path():
    code = library_example()
    assert "create_agent(" in code and "make_vector(" in code
    assert "torchforce/" not in code and "configs/" not in code, code


@pytest.mark.slow
def test_the_readme_library_example_runs_as_written(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", library_example()],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    saved = tmp_path / "checkpoints"
    assert saved.is_dir() and any(saved.iterdir()), sorted(p.name for p in tmp_path.iterdir())
