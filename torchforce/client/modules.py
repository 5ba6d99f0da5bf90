"""Where a project's own Python code comes from: its ``modules/`` folder, and nowhere else.

A spec may name a class of the user's (``"type": "mylayers:Gated"``); that class runs code, by design. So the one
place it is looked for is explicit: ``<project>/modules/``, put at the *end* of ``sys.path`` by ``tfcli`` (when it
validates an experiment) and by the worker (``--modules``), so a file there never shadows an installed package. The
project folder itself is never on the path: the worker runs with ``python -I`` (no current folder, no
``PYTHONPATH``), so a ``tqdm.py`` lying in the project is never imported in place of the real one. Nor does tfcli
read ``PYTHONPATH`` (``ignore_python_path``): a module only found there would pass ``tfcli experiment new`` and fail
in the worker.
"""

from __future__ import annotations

import os
import site
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


def ignore_python_path() -> None:
    """Take PYTHONPATH's folders off ``sys.path``, as the worker's ``python -I`` never has them, so that tfcli finds a
    user's module where its worker will, or not at all (the error then says where it is: ``missing_module_hint``).
    Called by tfcli's own process only (``cli.main`` run as the program). A folder that is also a site's
    (site-packages) stays: the worker reads it too."""
    if sys.flags.ignore_environment:
        return
    sites = {os.path.abspath(folder) for folder in site.getsitepackages()}
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        folder = os.path.abspath(entry) if entry else ""
        if not folder or folder in sites:
            continue
        for index, path in enumerate(sys.path):
            if path and os.path.abspath(path) == folder:
                del sys.path[index]  # the place PYTHONPATH put it (a later, site's own occurrence stays)
                break
