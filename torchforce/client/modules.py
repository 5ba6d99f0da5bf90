"""Where a project's own Python code comes from: its ``modules/`` folder, and nowhere else.

A spec may name a class of the user's (``"type": "mylayers:Gated"``); that class runs code, by design. So the one
place it is looked for is explicit: ``<project>/modules/``, put at the *end* of ``sys.path`` by ``tfcli`` (when it
validates an experiment) and by the worker (``--modules``), so a file there never shadows an installed package. The
project folder itself is never on the path: the worker runs with ``python -I`` (no current folder, no
``PYTHONPATH``), so a ``tqdm.py`` lying in the project is never imported in place of the real one.
"""

from __future__ import annotations

import sys
from pathlib import Path

FOLDER = "modules"


def modules_folder(root: Path) -> Path:
    return Path(root) / FOLDER


def use_modules(folder: Path | None) -> None:
    """Let imports find the user's modules in ``folder`` (if it exists), after everything installed."""
    if folder is None or not Path(folder).is_dir():
        return
    path = str(Path(folder).resolve())
    if path not in sys.path:
        sys.path.append(path)
