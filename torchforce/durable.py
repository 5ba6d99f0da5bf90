"""Writes that survive a crash or a power loss: ``sync_file`` flushes a file's bytes, or a folder's entries (new
files, renames), to the disk. Checkpoints and their pointers go through it before a rename makes them current."""

from __future__ import annotations

import os
from pathlib import Path


def sync_file(path: str | Path) -> None:
    """``fsync`` a file, or a folder (its entries: renames and new files in it)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
