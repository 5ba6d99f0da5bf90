"""A tfcli project: a folder with ``.tfcli/`` (settings and the state database), ``configs/`` and ``experiments/``.

Every command but ``init`` finds its project by walking up from the current folder. Config files are looked up as
tensorforce-client did (docs/tensorforce-0.4.md, Projects and config lookup): an existing path is used as it is;
otherwise a bare name (``.json`` appended when it has no extension) is looked up in ``configs/<kind>/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.store import ExperimentRecord, Store
from torchforce.configs import KINDS, folder
from torchforce.durable import unwritable
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


def write_json_atomically(path: Path, data: Any, *, mode: int | None = None, durable: bool = False) -> None:
    """Write ``data`` as JSON (indented, a newline at the end) with ``write_bytes_atomically``."""
    write_bytes_atomically(path, (json.dumps(data, indent=2) + "\n").encode(), mode=mode, durable=durable)


def write_bytes_atomically(path: Path, data: bytes, *, mode: int | None = None, durable: bool = False) -> None:
    """Write ``data`` through a temporary file and a rename, so a reader never sees half a file. The file gets the
    usual permissions (0644 with the common umask 022), not the private ones of a temporary file, unless ``mode``
    (0600 for settings that name a key file). ``durable``: on the disk before the rename, and the rename before
    this returns, so that a crash or power loss leaves the old file or the new one (checkpoint pointers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, mode if mode is not None else 0o666 & ~current_umask())
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            if durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if durable:
        from torchforce.durable import sync_file

        sync_file(path.parent)


def check_output(path: Path, what: str, *, example: str) -> None:
    """A ClientError unless the file ``path`` that a command writes with its ``-o/--output`` (``what``: "the
    plot") can be written: a folder that exists and takes new files, and no folder in its place (``example``: a
    file name to suggest in it). Checked before the work, not found at its end."""
    if not path.parent.is_dir():
        raise ClientError(
            f"the folder of {what} '{path}' does not exist",
            hint=f"Create it first ('mkdir -p {path.parent}'), or give another -o/--output.",
        )
    if path.is_dir():
        raise ClientError(f"{what} '{path}' is a folder", hint=f"Name the file to write: -o/--output {path / example}.")
    reason = unwritable(path.parent)
    if reason is not None:
        raise ClientError(
            f"cannot write {what} '{path}': the folder '{path.parent}' takes no new file ({reason})",
            hint="Give -o/--output a file in a folder you can write to.",
        )


def check_output_folder(folder: Path, what: str) -> None:
    """A ClientError unless ``folder``, given with a command's ``-o/--output`` to write ``what`` ("the schemas")
    into, can take them: a folder that exists (never made here, anywhere the user typed), and takes new files."""
    if not folder.exists():
        raise ClientError(
            f"the folder '{folder}' does not exist",
            hint=f"Create it first ('mkdir -p {folder}'), or give another -o/--output.",
        )
    if not folder.is_dir():
        raise ClientError(f"'{folder}' is a file, not a folder to write {what} into", hint="Give -o/--output a folder.")
    reason = unwritable(folder)
    if reason is not None:
        raise ClientError(
            f"cannot write into the folder '{folder}' ({reason})", hint="Give -o/--output a folder you can write to."
        )


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


def current_folder() -> Path:
    """The current folder; a ClientError when it no longer exists (deleted or moved under the shell)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise ClientError(
            "the current folder no longer exists (it was deleted or moved)",
            hint="Change to an existing folder ('cd' to it again if it was recreated) and run the command again.",
        ) from None


def _kind_of(path: Path) -> str | None:
    """``"file"``, ``"folder"`` or None: nothing there, or a name the system cannot look up (too long)."""
    try:
        return "file" if path.is_file() else "folder" if path.is_dir() else None
    except OSError:
        return None


def _plain_folder_name(name: Any) -> bool:
    """Whether ``name`` names one folder inside another: no path, no '..', no hidden name, not too long."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not name.startswith(".")
        and not any(mark in name for mark in ("/", "\\", "\0"))
        and len(name.encode(errors="surrogateescape")) <= 200
    )


def _refuse_files_in_place_of_folders(root: Path) -> None:
    """``init`` needs these folders; a file in the place of one is an error before anything is written."""
    for place in (root / MARKER, root / "configs", *(root / "configs" / kind for kind in KINDS), root / "experiments"):
        if place.exists() and not place.is_dir():
            raise ClientError(
                f"{place} is a file, but a project needs a folder there",
                hint="Move the file away and run 'tfcli init' again.",
            )


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
        here = Path(start or current_folder()).resolve()
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
        _refuse_files_in_place_of_folders(root)
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
        if (root / MARKER / DATABASE).exists():
            Store(root / MARKER / DATABASE)  # a damaged database is refused now, not after the configs are written
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
            link = (existing or {}).get("gcloud")
            if isinstance(link, dict) and link.get("project") == settings["remote_id"]:
                settings["gcloud"] = link  # a link to the same Google Cloud project stays
            queue = (existing or {}).get("queue")
            if isinstance(queue, dict):
                settings["queue"] = queue  # so does the queue's setting
            write_json_atomically(settings_path, settings, mode=0o600 if "gcloud" in settings else None)
        project = cls(root)
        project.store  # create the database now  # noqa: B018
        return project, written

    # ------------------------------------------------------------------ places

    @property
    def name(self) -> str:
        return str(self.settings.get("name"))

    @property
    def store(self) -> Store:
        """The state database. One that is new or empty while experiments/ holds experiment folders has lost
        them (it was deleted or replaced): a ClientWarning says so, and how to adopt them again."""
        if self._store is None:
            path = self.root / MARKER / DATABASE
            new = not path.exists()
            self._store = Store(path)
            if not self._store.experiments():
                _warn_of_stranded_folders(self, new)
        return self._store

    @property
    def experiments_folder(self) -> Path:
        folder = self.root / "experiments"
        if not folder.is_dir():
            shown = f"{self.root.name}/experiments"
            raise ClientError(
                f"the project's {shown} is not a folder" if folder.exists() else f"the project's {shown} is missing",
                hint=f"Move {folder} away, then run 'tfcli init' there to make the folder (configs are kept)."
                if folder.exists()
                else "Restore it, or run 'tfcli init' there to make an empty one (configs are kept).",
            )
        return folder

    def experiment_folder(self, name: str) -> Path:
        """``experiments/NAME``. A name that is no plain folder name (a path, '..', too long for a file name)
        is a SpecError naming the rule for experiment names, before any file is looked at."""
        if not _plain_folder_name(name):
            from torchforce.client.experiment_file import check_name

            check_name(name)
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
        try:
            candidate = Path(value).expanduser()
        except RuntimeError:  # ~user of no such user
            candidate = Path(value)
        folders = []
        for base in (current_folder(), self.root):
            full = candidate if candidate.is_absolute() else base / candidate
            if _kind_of(full) == "file":
                return full
            folders += [full] if _kind_of(full) == "folder" else []
        bare = candidate.name if candidate.suffix in CONFIG_SUFFIXES else candidate.name + ".json"
        target = self.root / "configs" / kind / bare
        if _kind_of(target) == "file":
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

    # ------------------------------------------------------------------ repair

    def repair(self, *, dry_run: bool = False) -> list[Adoption]:
        """Adopt again the experiment folders the state database does not know (after it was lost, emptied or
        replaced): a row for each folder whose ``experiment.json`` is valid, its status read from its results.
        Files are never touched. Returns what was done (or, with ``dry_run``, would be done) per such folder."""
        path = self.root / MARKER / DATABASE
        store = Store(path) if path.exists() or not dry_run else None  # a dry run creates no database
        known = {record.name for record in store.experiments()} if store is not None else set()
        taken = {name.replace("_", "-"): name for name in known}
        plan: list[Adoption] = []
        for entry in sorted(self.experiments_folder.iterdir()):
            if entry.name.startswith(".") or entry.name in known or not entry.is_dir():
                continue  # staging and deleting folders, known experiments, stray files
            adoption = _adoption(self, entry)
            clash = taken.get(entry.name.replace("_", "-"))
            if adoption.record is not None and clash is not None:
                adoption = Adoption(entry.name, "skip", None, f"its name clashes with the experiment '{clash}'")
            if adoption.record is not None:
                taken[entry.name.replace("_", "-")] = entry.name
            plan.append(adoption)
        if dry_run or store is None:
            return plan
        refused = store.adopt_experiments([adoption.record for adoption in plan if adoption.record is not None])
        return [
            Adoption(adoption.name, "skip", None, refused[adoption.name]) if refused.get(adoption.name) else adoption
            for adoption in plan
        ]


@dataclass
class Adoption:
    """What ``Project.repair`` does with an experiment folder the database does not know: ``adopt`` it (a row with
    ``status``; ``record`` is that row) or ``skip`` it; ``message`` says why (or the row's message)."""

    name: str
    action: str
    status: str | None
    message: str | None
    record: ExperimentRecord | None = None


def _adoption(project: Project, folder: Path) -> Adoption:
    """The row an experiment folder gets, or why it gets none."""
    from torchforce.client.experiment_file import check_stored

    name, spec_file = folder.name, folder / "experiment.json"
    if not spec_file.is_file():
        return Adoption(name, "skip", None, "it has no experiment.json")
    try:
        spec = check_stored(project, spec_file, name)
    except (SpecError, ClientError, OSError) as error:
        return Adoption(name, "skip", None, f"its experiment.json is not valid: {str(error).splitlines()[0]}")
    fields = _status_from_results(folder)
    if fields["status"] == "running":  # a local worker of the run lives: it runs here
        place: dict[str, Any] = {"backend": "local", "cluster": None}
    else:
        place = _where_it_ran(folder, (spec.get("cluster") or {}).get("name"))
    record = ExperimentRecord(
        name=name,
        created_at=_created_at(spec, spec_file),
        updated_at=time.time(),
        **place,
        **fields,
    )
    return Adoption(name, "adopt", record.status, record.message, record)


def _status_from_results(folder: Path) -> dict[str, Any]:
    """The row's status (and PID, message, start or end time) as the experiment's results tell: the state its
    worker last wrote to ``progress.json`` (finished, paused, stopped; running only while that worker still lives);
    a run that ended without saying so is failed (resumable where it has a checkpoint); no results: new."""
    from torchforce.client.backends.local import process_alive

    results = folder / "results"
    try:
        progress = json.loads((results / "progress.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        progress = None
    progress = progress if isinstance(progress, dict) else {}
    state, pid, updated = progress.get("state"), progress.get("pid"), progress.get("updated_at")
    ended_at = float(updated) if isinstance(updated, (int, float)) and not isinstance(updated, bool) else time.time()
    if state == "paused":
        return {"status": "paused"}
    if state in ("finished", "stopped"):
        return {"status": state, "ended_at": ended_at}
    if state == "running" and isinstance(pid, int) and not isinstance(pid, bool) and process_alive(pid, folder):
        return {"status": "running", "pid": pid, "started_at": time.time()}
    command = f"tfcli experiment start -e {folder.name}"
    if (results / "checkpoints" / "latest.json").is_file():
        then = f"continue with '{command} --resume'"
    elif results.is_dir() and any(results.iterdir()):
        then = f"start it over with '{command} --fresh'"
    else:
        return {"status": "new"}
    message = f"its run did not end cleanly (re-adopted by 'tfcli project repair'); {then}"
    error = _last_error(results / "worker.log")
    if error is not None:  # a worker that failed at build wrote no progress.json, only why in its log
        message = (
            f"its run failed: {error} (the last error in results/worker.log; re-adopted by 'tfcli project "
            f"repair'); {then}"
        )
    return {"status": "failed", "message": message, "ended_at": ended_at}


def _where_it_ran(folder: Path, spec_cluster: str | None) -> dict[str, Any]:
    """The row's backend and cluster (and a GKE run's RayJob): where the experiment's last run went, as its folder
    tells, since the spec's cluster is only where a start goes by default ('-c' sends it elsewhere). On GKE where
    ``gke/rayjob.json`` (written by each start there) names a RayJob of it, unless a start on this machine came
    later; on this machine where a local start left its marks (the worker's folder ``.worker``, the start's line in
    ``results/worker.log``): a run with local results and no sign of a cluster ran here. Where nothing tells (no
    run yet; a run on a Ray cluster leaves nothing here but results downloaded), as 'experiment new' writes it:
    this machine, the spec's cluster named."""
    from torchforce.client import manifests
    from torchforce.client.backends.base import WORKSPACE
    from torchforce.client.backends.gke import JOB_FILE

    try:  # the worker's folder, made afresh by each local start
        local_at = [(folder / WORKSPACE).stat().st_mtime] if (folder / WORKSPACE).is_dir() else []
    except OSError:
        local_at = []
    local_at = local_at or _local_starts(folder / "results" / "worker.log")
    try:
        job = json.loads((folder / "gke" / JOB_FILE).read_bytes())
        gke_at = (folder / "gke" / JOB_FILE).stat().st_mtime
    except (OSError, ValueError, RecursionError):
        job, gke_at = None, 0.0
    if (
        isinstance(job, dict)
        and isinstance(job.get("cluster"), str)
        and job["cluster"]
        and manifests.is_job_name(job.get("name"), folder.name)
        and gke_at >= max(local_at, default=0.0)
    ):
        return {"backend": "gke", "cluster": job["cluster"], "job": job["name"]}
    if local_at:
        return {"backend": "local", "cluster": None}
    return {"backend": "local", "cluster": spec_cluster}


LOCAL_START = re.compile(rb"=== (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:start|resume) ===\s*")  # local backend's


def _local_starts(log: Path) -> list[float]:
    """When the local backend started the experiment's worker, by the line it writes into ``worker.log`` at each
    start (a worker on a cluster writes none)."""
    starts: list[float] = []
    if not log.is_file():  # (a FIFO would block the read)
        return starts
    try:
        with log.open("rb") as file:
            for line in file:
                match = LOCAL_START.fullmatch(line) if line.startswith(b"=== ") else None
                if match is not None:
                    try:
                        starts.append(time.mktime(time.strptime(match[1].decode(), "%Y-%m-%d %H:%M:%S")))
                    except (ValueError, OverflowError):
                        continue
    except OSError:
        return []
    return starts


LOG_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ([A-Z]+) (.*)")  # the worker's log format
ERROR_SHOWN = 200  # characters of a logged error a run's message shows


def _last_error(log: Path) -> str | None:
    """The last error of a worker's log as one line: the exception of its last ERROR record with a traceback
    (``ValueError: ...``; a supervising worker's own ERROR line follows the traceback of the run it gave up on),
    else its last ERROR record's first line; shortened to about ERROR_SHOWN characters. None without one."""
    try:
        with log.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 65536))  # the end of a long run's log is enough
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    starts = [(index, match) for index, line in enumerate(lines) if (match := LOG_RECORD.fullmatch(line))]
    ends = [index for index, _ in starts][1:] + [len(lines)] if starts else []
    records = [  # each ERROR record: its message, then the lines up to the next record (a traceback)
        [match[2], *lines[index + 1 : end]]
        for (index, match), end in zip(starts, ends, strict=True)
        if match[1] in ("ERROR", "CRITICAL")
    ]
    if not records:
        return None
    line = records[-1][0]
    for record in reversed(records):
        tracebacks = [at for at, text in enumerate(record) if text.startswith("Traceback (most recent call last)")]
        if tracebacks:  # the exception: the first line after the last traceback's indented frames
            after = record[tracebacks[-1] + 1 :]
            line = next((text for text in after if text.strip() and not text[0].isspace()), line)
            break
    line = line.strip()
    return line if len(line) <= ERROR_SHOWN else line[: ERROR_SHOWN - 1].rstrip() + "…"


def _created_at(spec: dict[str, Any], spec_file: Path) -> float:
    """When the experiment was created: its spec's stamp, else the time its experiment.json was written."""
    try:
        return time.mktime(time.strptime(str(spec.get("created_at")), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return spec_file.stat().st_mtime


def _warn_of_stranded_folders(project: Project, new: bool) -> None:
    """Warn when an empty (or just created) state database leaves experiment folders without a row."""
    try:
        stranded = sorted(
            entry.name
            for entry in (project.root / "experiments").iterdir()
            if not entry.name.startswith(".") and (entry / "experiment.json").is_file()
        )
    except OSError:
        return
    if not stranded:
        return
    shown = ", ".join(stranded[:5]) + (f" and {len(stranded) - 5} more" if len(stranded) > 5 else "")
    database = f"{MARKER}/{DATABASE}"
    warnings.warn(
        f"the state database {database} {'was missing and is new' if new else 'is empty'}, but experiments/ holds "
        f"{len(stranded)} experiment folder{'s' if len(stranded) > 1 else ''} ({shown}): run 'tfcli project repair' "
        "to adopt them again",
        ClientWarning,
        stacklevel=3,
    )
