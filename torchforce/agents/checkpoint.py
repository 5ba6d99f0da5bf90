"""Checkpoint files: one ``<basename>-<timestep>.pt`` (torch.save, loadable with ``weights_only=True``), a JSON
manifest beside it (the resolved spec and the counters, readable by people and by ``tfcli``), and a ``checkpoint``
pointer file naming the latest one.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torchforce.durable import sync_file

POINTER = "checkpoint"
FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read as one: damaged (cut short, a flipped byte) or something else."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: damaged, or not a torchforce checkpoint ({problem})")


def pack(tree: Any) -> Any:
    """Numpy arrays become tagged tensors so the file loads with ``weights_only=True`` and unpacks exactly."""
    if isinstance(tree, np.ndarray):
        # Shared, not copied (a replay memory's snapshot can be gigabytes): save_checkpoint packs and saves in one
        # call, so nothing changes the array in between. Torch cannot share read-only or strided arrays: those copy.
        shareable = tree.flags.c_contiguous and tree.flags.writeable
        return {"__ndarray__": torch.from_numpy(tree if shareable else np.array(tree, order="C", copy=True))}
    if isinstance(tree, np.generic):
        return {"__ndarray__": torch.from_numpy(np.asarray(tree)).clone(), "__scalar__": True}
    if isinstance(tree, dict):
        return {key: pack(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(pack(value) for value in tree)
    return tree


def unpack(tree: Any) -> Any:
    if isinstance(tree, dict):
        if "__ndarray__" in tree:
            array = tree["__ndarray__"].numpy()
            return array[()] if tree.get("__scalar__") else array
        return {key: unpack(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(unpack(value) for value in tree)
    return tree


def _atomic_write(path: Path, write) -> None:
    """``write(temporary)``, then rename it to ``path``, durably: the file's bytes reach the disk before the rename,
    and the rename before this returns (a crash or power loss leaves the old file or the whole new one, never one
    cut short under the new name). The file gets the usual permissions of results (0666 less the umask, as every
    file torchforce writes), not the private 0600 of ``tempfile.mkstemp``."""
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(temporary)
        sync_file(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    sync_file(path.parent)


def save_checkpoint(directory: str | Path, name: str, payload: dict[str, Any], manifest: dict[str, Any]) -> Path:
    """Write ``<name>.pt`` and ``<name>.json`` atomically, then point ``checkpoint`` at them. Returns the .pt path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.pt"
    _atomic_write(path, lambda file: torch.save(pack({"format": FORMAT, **payload}), file))
    text = json.dumps({"format": FORMAT, "file": path.name, **manifest}, indent=2, default=str)
    _atomic_write(directory / f"{name}.json", lambda file: Path(file).write_text(text))
    _atomic_write(directory / POINTER, lambda file: Path(file).write_text(json.dumps({"latest": path.name}) + "\n"))
    return path


def find_checkpoint(directory: str | Path, file: str | None = None) -> Path:
    """The checkpoint to restore: ``file`` inside ``directory`` (with or without .pt), or the latest one."""
    directory = Path(directory)
    if file is not None:
        candidate = Path(file)
        if not candidate.is_absolute():
            candidate = directory / candidate
        if candidate.suffix != ".pt":
            candidate = candidate.with_name(candidate.name + ".pt")
        if not candidate.is_file():
            raise FileNotFoundError(f"no checkpoint {candidate}")
        return candidate
    pointer = directory / POINTER
    if not pointer.is_file():
        raise FileNotFoundError(f"no checkpoint in {directory} (no '{POINTER}' file)")
    try:
        latest = directory / json.loads(pointer.read_text())["latest"]
    except (ValueError, KeyError, TypeError) as error:  # ValueError: not JSON, or not UTF-8
        raise CheckpointError(pointer, f"no checkpoint's file name in it: {type(error).__name__}: {error}") from None
    if not latest.is_file():
        raise FileNotFoundError(f"the checkpoint named by {pointer} is missing: {latest.name}")
    return latest


def load_checkpoint(path: str | Path, *, mapped: bool = False) -> dict[str, Any]:
    """The payload of the checkpoint file ``path``; a CheckpointError naming it when it cannot be one. Loading runs
    no code from the file (``weights_only``). ``mapped``: the file is mapped into memory (``torch.load``'s ``mmap``)
    instead of read, so that its arrays' bytes come from the disk only when something reads them: the parts a caller
    leaves unread (a replay memory of gigabytes, for an agent restored only to act) cost no time and no memory. Its
    arrays are then copy-on-write views of the file: changing them never changes the file."""
    try:
        payload = unpack(torch.load(path, map_location="cpu", weights_only=True, mmap=mapped))
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever torch's unpickler makes of a damaged or foreign file
        if "Weights only load failed" in str(error):  # not torch's advice to load it unsafely: a file from others
            first = "it holds Python objects that a safe (weights-only) load does not build"
        else:
            first = str(error).splitlines()[0] if str(error) else ""
        raise CheckpointError(path, f"{type(error).__name__}: {first}") from None
    if not isinstance(payload, dict):
        raise CheckpointError(path, f"it holds a {type(payload).__name__}, not a checkpoint's dict")
    if payload.get("format") != FORMAT:
        raise ValueError(f"{path}: unsupported checkpoint format {payload.get('format')!r}, expected {FORMAT}")
    return payload
