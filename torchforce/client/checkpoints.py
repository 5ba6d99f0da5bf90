"""The checkpoints a worker writes under ``results/checkpoints``: the agent, the runner's state as plain data, and
the environments' state, which only a trusted (signed) checkpoint unpickles. See ``Checkpoints``."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from torchforce.durable import sync_file

LOG = logging.getLogger("torchforce.worker")
KEEP_CHECKPOINTS = 2


class Checkpoints:
    """Checkpoint folders under ``results/checkpoints``; ``latest.json`` is written last, so it only ever points
    at a complete checkpoint.

    A checkpoint folder ``<timestep:012d>/`` holds the agent's files (``torch.save``, loaded with
    ``weights_only=True``), the runner state as plain data (``runner.json``; its arrays and tensors in
    ``runner.pt``, loaded with ``weights_only=True``) and the environments' state (``environments.pkl``, the
    pickled copies of ``VectorEnvironment.get_state``: Gymnasium environments can only be saved whole).

    The newest ``KEEP_CHECKPOINTS`` folders are kept, and the one ``best.json`` names (the checkpoint of the best
    evaluation so far, ``mark_best``), however old.

    Unpickling runs whatever the file says, so ``load`` unpickles ``environments.pkl`` only when it is trusted:
    signed by this user (an HMAC-SHA256 with the secret in ``key_file``, by default ``default_key_file()``,
    readable by the user alone, as Jupyter signs notebooks) or loaded with ``trust_pickle=True``. Otherwise
    (``trust_pickle=False``, or a checkpoint written by someone else or on another machine) it is not read: the
    state comes back without the environments and without the episodes in progress, so the run goes on in fresh
    environments, starting new episodes, and a warning says why. ``load`` follows no ``latest.json`` or file out of
    the checkpoints folder (``..``, an absolute path, a symlink). Files get the usual permissions of results (0666
    less the umask), as ``write_json_atomically`` gives them.
    """

    RUNNER = "runner.json"
    ARRAYS = "runner.pt"
    ENVIRONMENTS = "environments.pkl"
    FORMAT = 2  # 1: runner.pkl, a pickle of the whole runner state (loaded only with trust_pickle=True)

    def __init__(self, folder: Path, *, key_file: Path | None = None) -> None:
        self.folder = folder
        self.key_file = key_file if key_file is not None else self.default_key_file()
        self._unsigned_warned = False

    @staticmethod
    def default_key_file() -> Path:
        """The user's signing secret: ``$XDG_DATA_HOME/torchforce/checkpoint.key`` (``~/.local/share`` by default),
        created (0600) by the first checkpoint."""
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(data) / "torchforce" / "checkpoint.key"

    def signing_key(self) -> Path | None:
        """The user's key file, created now if there is none yet (to hand to a cluster's workers, which then sign
        what this user trusts); None when it cannot be made or is readable by others."""
        return self.key_file if self._key(create=True) is not None else None

    def latest(self) -> dict[str, Any] | None:
        """``latest.json``: ``timesteps``, ``episodes`` and ``folder`` of the newest checkpoint; None when there is
        none yet. A damaged one is a ValueError naming it (a run must not start over the checkpoints it has)."""
        pointer_file = self.folder / "latest.json"
        if not pointer_file.is_file():
            return None
        try:
            pointer = json.loads(pointer_file.read_text())
        except (ValueError, RecursionError) as error:  # ValueError covers bad UTF-8 and JSON
            raise ValueError(f"{pointer_file} is damaged: {type(error).__name__}: {error}") from None
        timesteps = pointer.get("timesteps") if isinstance(pointer, dict) else None
        if not plain_name(pointer.get("folder") if isinstance(pointer, dict) else None) or not (
            isinstance(timesteps, int) and not isinstance(timesteps, bool) and timesteps >= 0
        ):
            raise ValueError(f"{pointer_file} is damaged: no checkpoint's folder and timesteps in {pointer!r}")
        return pointer

    @staticmethod
    def folder_name(timesteps: int) -> str:
        """The name of the checkpoint folder of timestep ``timesteps``."""
        return f"{timesteps:012d}"

    def best(self) -> dict[str, Any] | None:
        """``best.json``: ``timesteps``, ``mean_return`` and ``folder`` of the checkpoint that evaluated best; None
        when there is none (or it is not such an object)."""
        try:
            pointer = json.loads((self.folder / "best.json").read_text())
        except (OSError, ValueError):
            return None
        return pointer if isinstance(pointer, dict) and plain_name(pointer.get("folder")) else None

    def mark_best(self, timesteps: int, mean_return: float) -> dict[str, Any]:
        """Point ``best.json`` at the checkpoint of ``timesteps`` (written already): from now on it is never pruned,
        until another one is marked best."""
        from torchforce.client.project import write_json_atomically

        pointer = {"timesteps": timesteps, "mean_return": mean_return, "folder": self.folder_name(timesteps)}
        write_json_atomically(self.folder / "best.json", pointer, durable=True)
        return pointer

    # ------------------------------------------------------------------------------------------------ saving

    def save(
        self,
        agent: Any,
        runner_state: dict[str, Any],
        info: dict[str, Any],
        extra: Callable[[Path], None] | None = None,
    ) -> dict[str, Any]:
        """Write a checkpoint; ``extra(folder)`` may add files to it before it is complete. ``runner_state`` is
        plain data (JSON values, numpy arrays, tensors) but for ``environments``, the blobs of
        ``VectorEnvironment.get_state`` (or None)."""
        from torchforce.client.project import write_json_atomically

        name = self.folder_name(info["timesteps"])
        target = self.folder / name
        partial = self.folder / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        model = agent.save_model(partial, append_timestep=False)
        if extra is not None:
            extra(partial)
        state = dict(runner_state)
        environments = state.pop("environments", None)
        arrays: dict[str, Any] = {}
        record = {
            "format": self.FORMAT,
            "model": Path(model).name,
            "state": self._plain(state, arrays, "runner_state"),
            "environments": None if environments is None else self._write_environments(partial, environments),
        }
        if arrays:
            import torch

            torch.save(arrays, partial / self.ARRAYS)
        (partial / self.RUNNER).write_text(json.dumps(record) + "\n")  # one line: the history may be long
        _sync_tree(partial)  # every file on the disk before the folder takes its name, and latest.json names it
        # a checkpoint of this timestep saved before (a pointer may name it) stays whole until the new one has its
        # name: moved aside, then removed
        replaced = target.with_name(f".{name}.{secrets.token_hex(4)}.replaced") if target.exists() else None
        if replaced is not None:
            os.replace(target, replaced)
        try:
            os.replace(partial, target)
        except OSError:
            if replaced is not None:
                os.replace(replaced, target)
            raise
        sync_file(self.folder)
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)
        pointer = {**info, "folder": name, "saved_at": time.time()}
        write_json_atomically(self.folder / "latest.json", pointer, durable=True)
        self._prune()
        return pointer

    def _prune(self) -> None:
        """Remove all but the newest ``KEEP_CHECKPOINTS`` checkpoint folders and the best one. A ``best.json`` that
        cannot be read could name any of them: then nothing is removed (and a warning says why)."""
        best = self.best()
        if best is None and (self.folder / "best.json").exists():
            LOG.warning(
                "%s cannot be read, so no checkpoint is removed (any could be the best); mark the best again or "
                "delete the file",
                self.folder / "best.json",
            )
            return
        folders = sorted(p for p in self.folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        for old in folders[:-KEEP_CHECKPOINTS]:
            if best is None or old.name != best["folder"]:
                shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def _plain(cls, value: Any, arrays: dict[str, Any], where: str) -> Any:
        """``value`` as JSON, its numpy arrays and tensors moved into ``arrays`` (named by a small placeholder)."""
        import numpy as np
        import torch

        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray) and not value.dtype.hasobject:
            key = f"array{len(arrays)}"  # raw bytes: every numeric dtype comes back exactly
            arrays[key] = torch.from_numpy(np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8).copy())
            return {"__array__": key, "dtype": value.dtype.str, "shape": list(value.shape)}
        if isinstance(value, torch.Tensor):
            key = f"tensor{len(arrays)}"
            arrays[key] = value.detach().cpu()
            return {"__tensor__": key}
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return {key: cls._plain(item, arrays, f"{where}.{key}") for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [cls._plain(item, arrays, f"{where}[{index}]") for index, item in enumerate(value)]
        raise TypeError(f"{where}: {type(value).__qualname__} is not plain data (JSON values, numpy arrays, tensors)")

    @classmethod
    def _restored(cls, value: Any, arrays: dict[str, Any]) -> Any:
        """``value`` of ``_plain`` with its arrays and tensors put back."""
        import numpy as np

        if isinstance(value, list):
            return [cls._restored(item, arrays) for item in value]
        if not isinstance(value, dict):
            return value
        if "__array__" in value:
            raw = arrays[value["__array__"]].numpy().tobytes()
            return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()
        if "__tensor__" in value:
            return arrays[value["__tensor__"]]
        return {key: cls._restored(item, arrays) for key, item in value.items()}

    def _write_environments(self, folder: Path, blobs: list[bytes]) -> dict[str, Any]:
        data = b"".join(blobs)
        (folder / self.ENVIRONMENTS).write_bytes(data)
        lengths = [len(blob) for blob in blobs]
        key = self._key(create=True)
        if key is None and not self._unsigned_warned:
            self._unsigned_warned = True
            LOG.warning(
                "the environments' state is saved unsigned (no key in %s): a resumed run starts new episodes "
                "in fresh environments, unless resumed with trust_pickle",
                self.key_file,
            )
        return {"lengths": lengths, "hmac": None if key is None else self._signature(key, lengths, data)}

    # ------------------------------------------------------------------------------------------------ the key

    @staticmethod
    def _signature(key: bytes, lengths: list[int], data: bytes) -> str:
        message = b"torchforce environments\n" + json.dumps(lengths).encode() + b"\n" + data
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def _key(self, *, create: bool = False) -> bytes | None:
        """The user's signing secret; None when there is none (or it cannot be created, or others can read it)."""
        try:
            return self._read_key()
        except FileNotFoundError:
            if not create:
                return None
        except OSError as error:  # a symlink (O_NOFOLLOW), a folder, no permission
            LOG.warning("cannot read the checkpoint key %s: %s", self.key_file, error)
            return None
        try:
            self.key_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = self.key_file.with_name(f".{self.key_file.name}.{secrets.token_hex(8)}")
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(handle, "w") as file:
                file.write(secrets.token_hex(32) + "\n")
            try:
                os.link(temporary, self.key_file)  # atomic, and never replaces a key another worker just made
            except FileExistsError:
                pass
            finally:
                temporary.unlink()
            return self._read_key()
        except OSError as error:
            LOG.warning("cannot create the checkpoint key %s: %s", self.key_file, error)
            return None

    def _read_key(self) -> bytes | None:
        handle = os.open(self.key_file, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(handle, "rb") as file:
            status = os.fstat(file.fileno())
            if status.st_uid != os.getuid() or status.st_mode & 0o077:
                LOG.warning(
                    "the checkpoint key %s is not private to this user (mode %o): it is not used",
                    self.key_file,
                    status.st_mode & 0o777,
                )
                return None
            return file.read().strip() or None

    # ------------------------------------------------------------------------------------------------ loading

    def load(self, agent: Any, *, trust_pickle: bool | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Restore the agent from the latest checkpoint; return its pointer and the runner state.

        ``trust_pickle``: None unpickles the environments' state when this user signed it, True always, False
        never; when it is not unpickled, ``state["environments"]`` and the runner's episodes in progress
        (``state["runner"]["rows"]``) are None and a warning says why (see the class doc).
        """
        root = self.folder.resolve()
        pointer_file = self.folder / "latest.json"
        if not pointer_file.is_file():
            raise FileNotFoundError(f"no checkpoint in {self.folder}")
        check_inside(pointer_file, root, pointer_file)
        pointer = json.loads(pointer_file.read_text())
        name = pointer.get("folder") if isinstance(pointer, dict) else None
        if not plain_name(name):
            raise ValueError(
                f"{pointer_file}: 'folder' must name a checkpoint folder inside {self.folder}, got "
                f"{name!r}; refusing to follow it out of the checkpoints folder"
            )
        folder = self.folder / name
        check_inside(folder, root, pointer_file)
        inner = folder.resolve()
        for parent, folders, files in os.walk(folder):  # the agent's files, the Ray workers': none leads elsewhere
            for entry in (*folders, *files):
                check_inside(Path(parent) / entry, inner, pointer_file)
        if not (folder / self.RUNNER).is_file() and (folder / "runner.pkl").is_file():
            return pointer, self._load_format_1(agent, folder, trust_pickle)
        record = json.loads((folder / self.RUNNER).read_text())
        model = record.get("model")
        if not plain_name(model):
            raise ValueError(f"{folder / self.RUNNER}: 'model' must name a file in {folder}, got {model!r}")
        agent.restore_model(folder, file=model)
        arrays = {}
        if (folder / self.ARRAYS).is_file():
            import torch

            arrays = torch.load(folder / self.ARRAYS, map_location="cpu", weights_only=True)
        state = self._restored(record["state"], arrays)
        state["environments"] = None
        if record.get("environments") is not None:
            state["environments"] = self._load_environments(folder, record["environments"], trust_pickle)
            if state["environments"] is None and isinstance(state.get("runner"), dict) and "rows" in state["runner"]:
                state["runner"]["rows"] = None  # their environments are not restored: new episodes start
        return pointer, state

    def _load_environments(self, folder: Path, entry: dict[str, Any], trust_pickle: bool | None) -> list[bytes] | None:
        lengths = entry.get("lengths")
        if not isinstance(lengths, list) or not all(isinstance(n, int) and n >= 0 for n in lengths):
            raise ValueError(f"{folder / self.RUNNER}: damaged 'environments' entry {entry!r}")
        if trust_pickle is False:
            reason = "trust_pickle is False"
        else:
            data = (folder / self.ENVIRONMENTS).read_bytes()
            if sum(lengths) != len(data):
                raise ValueError(f"{folder / self.ENVIRONMENTS} is damaged: {len(data)} bytes, expected {sum(lengths)}")
            key = self._key()
            signature = entry.get("hmac")
            if trust_pickle or (
                key is not None
                and isinstance(signature, str)  # signed
                and hmac.compare_digest(signature, self._signature(key, lengths, data))
            ):
                offsets = [sum(lengths[:index]) for index in range(len(lengths) + 1)]
                return [data[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)]
            reason = (
                f"it is not signed with this user's key ({self.key_file}): it was written by someone else, "
                "on another machine, or changed since"
            )
        LOG.warning(
            "checkpoint %s: the environments' state (%s) is not loaded, because %s, and unpickling it would "
            "run whatever it holds. The run goes on in fresh environments, starting new episodes, so it will "
            "not end exactly as an uninterrupted one. Resume with 'tfcli experiment start --resume "
            "--trust-pickle' (or trust_pickle=True) only if you trust whoever wrote it.",
            folder.name,
            self.ENVIRONMENTS,
            reason,
        )
        return None

    def _load_format_1(self, agent: Any, folder: Path, trust_pickle: bool | None) -> dict[str, Any]:
        """A checkpoint of the first format: the whole runner state in one pickle, loaded only when trusted."""
        if not trust_pickle:
            raise ValueError(
                f"{folder} was written by an earlier torchforce: its runner state is a pickle "
                "(runner.pkl), and unpickling runs whatever it holds; load it with trust_pickle=True "
                "only if you trust whoever wrote it"
            )
        import pickle

        agent.restore_model(folder)
        with open(folder / "runner.pkl", "rb") as file:
            return pickle.load(file)  # noqa: S301 - the caller trusts it (trust_pickle=True)


def plain_name(name: object) -> TypeGuard[str]:
    """A file or folder name, not a path: what checkpoint pointers may name inside the checkpoints folder."""
    return isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name and "\\" not in name


def check_inside(path: Path, root: Path, pointer_file: Path) -> None:
    """A ValueError when ``path`` leads out of ``root`` (through a symbolic link): results files are never followed
    out of the results folder."""
    resolved, inner = path.resolve(), root.resolve()
    if resolved != inner and inner not in resolved.parents:
        raise ValueError(
            f"{path} leads out of {inner} (to {resolved}); refusing to load the checkpoint named by "
            f"{pointer_file}: results files are never followed out of the results folder"
        )


def _sync_tree(folder: Path) -> None:
    """``fsync`` every file and folder under ``folder``, and ``folder`` itself."""
    for parent, _, files in os.walk(folder):
        for name in files:
            sync_file(Path(parent) / name)
        sync_file(parent)
