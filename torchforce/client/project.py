"""A tfcli project: a folder with ``.tfcli/`` (settings and the state database), ``configs/`` and ``experiments/``.

Every command but ``init`` finds its project by walking up from the current folder. Config files are looked up as
tensorforce-client did (reference §8.1): an existing path is used as it is; otherwise a bare name (``.json``
appended when it has no extension) is looked up in ``configs/<kind>/``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.store import Store
from torchforce.configs import KINDS, folder
from torchforce.spec import SpecError, did_you_mean, load_file
from torchforce.spec.errors import describe

MARKER = ".tfcli"
SETTINGS = "project.json"
DATABASE = "state.db"
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def current_umask() -> int:
    """The process's umask, read without changing it where /proc tells it (changing it, even for a moment, would
    race with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomically(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file. The file gets the
    usual permissions (0644 with the common umask 022), not the private ones of a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o666 & ~current_umask())
        with os.fdopen(handle, "w") as file:
            json.dump(data, file, indent=2)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_settings(path: Path) -> dict[str, Any]:
    """The project settings in ``path``; a damaged file is a ClientError saying how to repair it."""
    try:
        settings = load_file(path)
    except SpecError as error:
        raise ClientError(
            f"the project settings {path} are damaged: {error.message}",
            hint="Fix the file, or run 'tfcli init --force' there to write new settings (configs are kept).",
        ) from None
    if not isinstance(settings, dict):
        raise ClientError(
            f"the project settings {path} are damaged: expected a JSON object, got {describe(settings)}",
            hint="Fix the file, or run 'tfcli init --force' there to write new settings (configs are kept).",
        )
    return settings


def _refuse_a_project_inside_another(root: Path) -> None:
    for parent in root.parents:
        if (parent / MARKER / SETTINGS).is_file():
            raise ClientError(
                f"{root} is inside the tfcli project at {parent}: commands run here already use that project",
                hint="Run tfcli there, or use --force to make a separate project in this folder.",
            )


def _refuse_changed_settings(
    root: Path, existing: dict[str, Any], *, name: str | None, remote_project_id: str | None
) -> None:
    """Re-running ``init`` with the project's own name (or remote id) is fine; changing either needs --force."""
    if name is not None and name != existing.get("name"):
        raise ClientError(
            f"{root} is already a project named '{existing.get('name')}', not '{name}'",
            hint="Use --force to rename it.",
        )
    current = existing.get("remote_id")
    if remote_project_id is not None and remote_project_id != current:
        has = f"the remote project id '{current}'" if current else "no remote project id"
        raise ClientError(
            f"{root} is already a project with {has}, not '{remote_project_id}'",
            hint="Use --force to change its remote project id.",
        )


class Project:
    """The project rooted at ``root`` (which must already be initialised; see ``Project.init``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        settings = self.root / MARKER / SETTINGS
        if not settings.is_file():
            raise ClientError(f"{self.root} is not a tfcli project", hint="Run 'tfcli init' there first.")
        self.settings: dict[str, Any] = read_settings(settings)
        self._store: Store | None = None

    # ------------------------------------------------------------------ finding and creating

    @classmethod
    def find(cls, start: str | Path | None = None) -> Project:
        """The project containing ``start`` (default: the current folder), found by walking up."""
        here = Path(start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if (candidate / MARKER / SETTINGS).is_file():
                return cls(candidate)
        raise ClientError(
            f"no tfcli project here ({here}) or in any parent folder",
            hint="Run 'tfcli init' to make this folder a project.",
        )

    @classmethod
    def init(
        cls, root: str | Path, *, name: str | None = None, remote_project_id: str | None = None, force: bool = False
    ) -> tuple[Project, list[str]]:
        """Make ``root`` a project; returns it and the config files written.

        The package's default configs are copied into ``configs/``; a file that is already there is only replaced
        with ``force``, so re-running ``init`` never overwrites a user's configs. Settings are kept unless forced.
        """
        root = Path(root).resolve()
        settings_path = root / MARKER / SETTINGS
        existing = None
        if settings_path.is_file() and not force:
            existing = read_settings(settings_path)
        elif settings_path.is_file():  # --force also repairs damaged settings
            try:
                existing = read_settings(settings_path)
            except ClientError:
                existing = {}
        # Every check comes before anything is written: a refused init leaves the folders as they were.
        if existing is None and not force:
            _refuse_a_project_inside_another(root)
        if existing is not None and not force:
            _refuse_changed_settings(root, existing, name=name, remote_project_id=remote_project_id)
        written = []
        for kind in KINDS:
            source, target = folder(kind), root / "configs" / kind
            target.mkdir(parents=True, exist_ok=True)
            for file in sorted(source.glob("*")):
                if file.suffix not in CONFIG_SUFFIXES:
                    continue
                destination = target / file.name
                if destination.exists() and not force:
                    continue
                shutil.copyfile(file, destination)
                written.append(str(destination.relative_to(root)))
        (root / "experiments").mkdir(exist_ok=True)
        if existing is None or force:
            settings = {
                "name": name or (existing or {}).get("name") or root.name,
                "remote_id": remote_project_id or (existing or {}).get("remote_id"),
                "cloud_provider": "google",
                "created_at": (existing or {}).get("created_at") or time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
            write_json_atomically(settings_path, settings)
        project = cls(root)
        project.store  # create the database now  # noqa: B018
        return project, written

    # ------------------------------------------------------------------ places

    @property
    def name(self) -> str:
        return str(self.settings.get("name"))

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.root / MARKER / DATABASE)
        return self._store

    @property
    def experiments_folder(self) -> Path:
        return self.root / "experiments"

    def experiment_folder(self, name: str) -> Path:
        return self.experiments_folder / name

    # ------------------------------------------------------------------ configs

    def config_names(self, kind: str) -> list[str]:
        target = self.root / "configs" / kind
        return sorted(p.stem for p in target.glob("*") if p.suffix in CONFIG_SUFFIXES) if target.is_dir() else []

    def find_config(self, value: str, kind: str, path: str) -> Path:
        """The file ``value`` names: an existing path (relative to the current folder or the project), else
        ``configs/<kind>/<name>[.json]``. Unknown names are a SpecError listing the known ones."""
        what = f"{kind[:-1]} config"
        expected = f"a file, or a name in configs/{kind}/"
        if not value.strip():
            raise SpecError(path, f"an empty {what} name", got=value, expected=expected)
        candidate = Path(value).expanduser()
        folders = []
        for base in (Path.cwd(), self.root):
            full = candidate if candidate.is_absolute() else base / candidate
            if full.is_file():
                return full
            folders += [full] if full.is_dir() else []
        bare = candidate.name if candidate.suffix in CONFIG_SUFFIXES else candidate.name + ".json"
        target = self.root / "configs" / kind / bare
        if target.is_file():
            return target
        if folders:
            raise SpecError(path, f"'{value}' is a folder, not a file", expected=expected)
        known = self.config_names(kind)
        guess = did_you_mean(Path(bare).stem, known)
        looks_like_a_path = candidate.is_absolute() or len(candidate.parts) > 1
        raise SpecError(
            path,
            f"file not found: '{value}', nor a {what} '{bare}' in configs/{kind}/"
            if looks_like_a_path
            else f"no {what} named '{value}'",
            expected=None if looks_like_a_path else expected,
            hint=("Known: " + ", ".join(known) + "." if known else f"configs/{kind}/ is empty.")
            + (f" Did you mean '{guess}'?" if guess else ""),
        )

    def load_config(self, value: Any, kind: str, path: str) -> tuple[Any, str | None]:
        """A config's contents and where it came from: inline values pass through (source None), strings are
        looked up with ``find_config`` and loaded (JSON or YAML)."""
        if not isinstance(value, str):
            return value, None
        file = self.find_config(value, kind, path)
        try:
            return load_file(file), str(file.relative_to(self.root) if file.is_relative_to(self.root) else file)
        except SpecError as error:
            raise SpecError(
                path, error.message, got=error.got, expected=error.expected, hint=error.hint, file=str(file)
            ) from None
