"""Writes that survive a crash or a power loss: ``sync_file`` flushes a file's bytes, or a folder's entries (new
files, renames), to the disk. Checkpoints and their pointers go through it before a rename makes them current.
``unwritable`` says, before long work, whether the file it ends with can be made at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def sync_file(path: str | Path) -> None:
    """``fsync`` a file, or a folder (its entries: renames and new files in it)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def unwritable(folder: str | Path) -> str | None:
    """Why no new file can be made in the existing ``folder`` ("Permission denied", "Read-only file system"), or
    None when one can. It makes one and removes it: ``os.access`` alone passes for root, and on file systems that
    take no file whatever the modes say (``/proc``)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "Permission denied"
    try:
        descriptor, name = tempfile.mkstemp(dir=folder, prefix=".tfcli-", suffix=".probe")
    except OSError as error:
        return error.strerror or str(error)
    os.close(descriptor)
    os.unlink(name)
    return None
