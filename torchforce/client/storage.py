"""Where a workload's results live while it runs: a folder on this machine, or a URI that the cluster and this
machine both reach (any fsspec filesystem: ``file://`` here and in the tests, ``gs://`` for GKE).

The client reads progress, logs and checkpoint pointers through a ``Storage`` without caring which it is, and
``download`` copies the results into the experiment's ``results/`` folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError


def local_path(location: str | Path) -> Path | None:
    """The folder a location names on this machine (a plain path or ``file://``), or None for a remote URI."""
    text = str(location)
    if text.startswith("file://"):
        return Path(text[len("file://") :])
    if "://" in text:
        return None
    return Path(text).expanduser()


class Storage:
    """A folder, named by a path or a URI; every path below is relative to it."""

    def __init__(self, location: str | Path) -> None:
        self.location = str(location).rstrip("/")
        self.local = local_path(location)
        self._fs: Any = None

    def __repr__(self) -> str:
        return f"Storage({self.location!r})"

    def child(self, *parts: str) -> Storage:
        return Storage("/".join([self.location, *parts]))

    @property
    def fs(self) -> Any:
        """The fsspec filesystem of a remote location (imported only when one is used)."""
        if self._fs is None:
            try:
                import fsspec
            except ImportError:
                raise ClientError(f"storage at '{self.location}' needs fsspec: pip install fsspec") from None
            try:
                self._fs, _ = fsspec.core.url_to_fs(self.location)
            except (ImportError, ValueError) as error:
                raise ClientError(f"cannot use the storage '{self.location}': {error}") from None
        return self._fs

    def _remote(self, relative: str) -> str:
        return f"{self.location}/{relative}" if relative else self.location

    def read_text(self, relative: str) -> str | None:
        """The file's text, or None when it does not exist (or cannot be read)."""
        if self.local is not None:
            try:
                return (self.local / relative).read_text(errors="replace")
            except (OSError, ValueError):
                return None
        try:
            with self.fs.open(self._remote(relative), "r") as file:
                return str(file.read())
        except Exception:  # noqa: BLE001 - a remote filesystem raises its own kinds; unreadable is unreadable
            return None

    def exists(self, relative: str) -> bool:
        if self.local is not None:
            return (self.local / relative).exists()
        try:
            return bool(self.fs.exists(self._remote(relative)))
        except Exception:  # noqa: BLE001 - as in read_text
            return False

    def write_text(self, relative: str, text: str) -> None:
        """Write a file whole (through a temporary name and a rename where the filesystem has one)."""
        if self.local is not None:
            target = self.local / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.tmp")
            temporary.write_text(text)
            os.replace(temporary, target)
            return
        with self.fs.open(self._remote(relative), "w") as file:
            file.write(text)

    def remove(self, relative: str) -> None:
        if self.local is not None:
            path = self.local / relative
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            return
        if self.fs.exists(self._remote(relative)):
            self.fs.rm(self._remote(relative), recursive=True)

    def upload(self, source: Path, relative: str) -> None:
        """Copy the local file ``source`` to ``relative``."""
        if self.local is not None:
            target = self.local / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            return
        self.fs.put_file(str(source), self._remote(relative))

    def download(self, relative: str, target: Path, skip: tuple[str, ...] = ()) -> int:
        """Copy the folder ``relative`` into the local folder ``target`` (files there that it also has are
        replaced; others are kept), leaving out files named in ``skip``. Symbolic links are not followed. Returns
        the number of files copied."""
        refuse_links(target, f"the folder {target}")
        copied = 0
        if self.local is not None:
            source = self.local / relative
            if not source.is_dir():
                return 0
            if source.resolve() == target.resolve():
                return 0
            for root, folders, files in os.walk(source):  # os.walk does not follow links to folders
                base = Path(root)
                destination = target / base.relative_to(source)
                destination.mkdir(parents=True, exist_ok=True)
                folders[:] = [name for name in folders if not (base / name).is_symlink()]
                for name in files:
                    if (base / name).is_symlink() or name in skip:
                        continue
                    shutil.copyfile(base / name, destination / name)
                    copied += 1
            return copied
        remote = self._remote(relative)
        if not self.fs.exists(remote):
            return 0
        for path in self.fs.find(remote):
            if Path(path).name in skip:
                continue
            relative_path = Path(path).relative_to(Path(self.fs._strip_protocol(remote)))
            if ".." in relative_path.parts:  # a key that climbs out of the folder is not copied out of target
                continue
            destination = target / relative_path
            destination.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(path, str(destination))
            copied += 1
        return copied


def links_below(folder: Path, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """The symbolic links in ``folder`` and below (none followed; sorted), or ``folder`` itself if it is one,
    leaving out its entries named in ``skip``: a run writes into its experiment's folder, and a download into the
    results, where a link (a folder copied from someone else) would send what is written elsewhere."""
    if folder.is_symlink():
        return [folder]
    links = []
    for root, folders, files in os.walk(folder):  # os.walk does not follow links to folders
        base = Path(root)
        if base == folder:
            folders[:] = [name for name in folders if name not in skip]
        links += [base / name for name in (*folders, *files) if (base / name).is_symlink()]
    return sorted(links)


def refuse_links(folder: Path, where: str, *, skip: tuple[str, ...] = ()) -> None:
    """A ClientError naming the first symbolic link in ``folder`` (``links_below``), which ``where`` (e.g. "experiment
    'cp'") holds; nothing where it holds none."""
    links = links_below(folder, skip=skip)
    if links:
        link = links[0]
        shown = link.relative_to(folder.parent) if link == folder else link.relative_to(folder)
        raise ClientError(
            f"{where} holds a symbolic link, {shown} -> {os.readlink(link)}: what tfcli writes there would go "
            "through the link, elsewhere",
            hint=f"Remove the link ('rm {link}'), or put a copy of what it points to in its place.",
        )
