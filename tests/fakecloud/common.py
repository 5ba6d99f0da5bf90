"""Shared pieces of the fake cloud: the state file and its lock, the call record, injected failures, the
accelerator table, and the helpers that find and kill the processes the fake spawned.

Everything lives under one folder (``TFCLI_FAKE_CLOUD``): ``calls.jsonl`` (every call, in order),
``state.json`` (clusters, contexts, objects, ...; written atomically under ``state.lock``), ``buckets/<name>/``
(the objects of gs://name) and ``jobs/<context>/<rayjob>/`` (what the fake KubeRay operator ran).

gcloud's configuration is not in that folder: as the real gcloud, the fake reads the active account, its project
and the credentials from the folder ``CLOUDSDK_CONFIG`` names, else from the user's default one, which for the fake
is ``home/.config/gcloud`` under its folder (the real one is ``~/.config/gcloud``, never touched by the tests). It
keeps them in the files gcloud keeps: ``active_config`` (the configuration's name), ``configurations/config_NAME``
(``[core]`` ``account`` and ``project``) and ``credentials.db`` (a row per account; the fake stores the key file's
path and hash, never the key)."""

from __future__ import annotations

import configparser
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import signal
import sqlite3
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ENV_ROOT = "TFCLI_FAKE_CLOUD"
ENV_JOB = "TFCLI_FAKE_CLOUD_JOB"  # marks every process a RayJob run started, and their descendants
ENV_CONFIG = "CLOUDSDK_CONFIG"  # gcloud's configuration folder (the user's default one when unset)
ENV_CONFIG_NAME = "CLOUDSDK_ACTIVE_CONFIG_NAME"  # a named configuration in that folder, over active_config
ENV_ACCOUNT = "CLOUDSDK_CORE_ACCOUNT"  # the account, over the configuration's own
USER_ACCOUNT = "me@example.com"  # the user's own gcloud login, in the user's default configuration
USER_PROJECT = "my-own-project"

ACCELERATORS = {
    "nvidia-tesla-t4": ("NVIDIA T4", 4),
    "nvidia-l4": ("NVIDIA L4", 8),
    "nvidia-tesla-a100": ("NVIDIA A100 40GB", 16),
    "nvidia-h100-80gb": ("NVIDIA H100 80GB", 8),
}
ALL_GPUS = list(ACCELERATORS)
DEFAULT_ZONE_ACCELERATORS = {
    "us-central1-a": ALL_GPUS,
    "us-central1-b": ALL_GPUS,
    "us-central1-c": ALL_GPUS,
    "europe-west4-a": ALL_GPUS,
    "europe-west1-b": ["nvidia-tesla-t4"],
}
# The machine family each accelerator attaches to (GKE refuses other pairings).
ACCELERATOR_MACHINE_FAMILY = {
    "nvidia-tesla-t4": "n1",
    "nvidia-l4": "g2",
    "nvidia-tesla-a100": "a2",
    "nvidia-h100-80gb": "a3",
}


class Exit(Exception):
    """Ends a fake command: ``code``, and what it prints."""

    def __init__(self, code: int, stderr: str = "", stdout: str = ""):
        super().__init__(stderr)
        self.code = code
        self.stderr = stderr
        self.stdout = stdout


def root_from_env() -> Path:
    value = os.environ.get(ENV_ROOT)
    if not value:
        sys.stderr.write(f"fake cloud: {ENV_ROOT} is not set (use the fake_cloud fixture)\n")
        raise SystemExit(3)
    return Path(value)


def now_iso(kube: bool = False) -> str:
    """GCP timestamps read ``2025-01-02T03:04:05+00:00``; Kubernetes ones ``2025-01-02T03:04:05Z``."""
    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if kube else stamp.isoformat()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


AUTH_PLUGIN = "gke-gcloud-auth-plugin"  # what kubectl runs for the credentials of a GKE context


def default_state() -> dict:
    return {
        "failures": [],
        "accelerators": {},  # zone -> [types], overriding DEFAULT_ZONE_ACCELERATORS
        "auth": {"accounts": {}},  # every activation's key (the active account is per configuration folder)
        "buckets": {},
        "clusters": {},  # "P/Z/NAME" -> cluster resource (full, before default values are left out)
        "contexts": {},  # context -> "P/Z/NAME"
        "current_context": None,
        "context_namespaces": {},  # context -> the namespace set on it in the user's kubeconfig (none: default)
        "objects": {},  # context -> {"kind/namespace/name": record}
        "repositories": {},
        "images": {},
        "iam": {},
        "settings": {"controller_delay": 0.0, "startup_delay": 0.0, "reconcile_delay": 0.0},
        "processes": [],  # every process group the fake KubeRay started: {pid, starttime, context, name, run}
        "counter": 1000,
    }


class Store:
    """The state of one fake cloud, read and written under an exclusive lock."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.state_path = self.root / "state.json"
        self.lock_path = self.root / "state.lock"
        self.calls_path = self.root / "calls.jsonl"

    def setup(self) -> None:
        for sub in ("bin", "buckets", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        with self.transaction():  # writes the initial state file under the lock
            pass

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self) -> dict:
        try:
            state = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            state = {}
        for key, value in default_state().items():
            state.setdefault(key, value)
        return state

    def save(self, state: dict) -> None:
        tmp = self.state_path.with_name(f"state.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict]:
        """The state, saved when the block ends without an exception other than ``Exit``."""
        with self.locked():
            state = self.load()
            try:
                yield state
            except Exit:
                self.save(state)
                raise
            self.save(state)

    def next_number(self, state: dict) -> int:
        state["counter"] += 1
        return state["counter"]

    def record(self, tool: str, args: list[str]) -> None:
        entry = {"argv": [tool, *args], "stdin": stdin_kind(), "time": time.time(), "pid": os.getpid()}
        # the configuration it ran with (None: the user's default one), and the account active there, as which a
        # gcloud call, and the auth plugin of a kubectl call, would act (None: none with credentials)
        entry["config"] = os.environ.get(ENV_CONFIG) or None
        entry["account"] = active_account(config_dir(self.root))
        entry["stdin_piped"] = entry["stdin"] == "pipe"
        with self.locked(), open(self.calls_path, "a") as out:
            out.write(json.dumps(entry) + "\n")

    def calls(self) -> list[dict]:
        if not self.calls_path.exists():
            return []
        return [json.loads(line) for line in self.calls_path.read_text().splitlines() if line.strip()]

    def bucket_dir(self, name: str) -> Path:
        return self.root / "buckets" / name

    def job_dir(self, context: str, namespace: str, name: str) -> Path:
        base = self.root / "jobs" / context
        return base / name if namespace == "default" else base / namespace / name


# ---- gcloud's configuration ----------------------------------------------------------------------------------


def default_config_dir(root: Path) -> Path:
    """The user's own gcloud configuration when ``CLOUDSDK_CONFIG`` is unset: ``~/.config/gcloud`` for the real
    gcloud, a folder under the fake's root for the fake."""
    return Path(root) / "home" / ".config" / "gcloud"


def config_dir(root: Path) -> Path:
    """The configuration folder a call runs with: ``CLOUDSDK_CONFIG``, else the user's default one."""
    value = os.environ.get(ENV_CONFIG)
    return Path(value) if value else default_config_dir(root)


def config_file(folder: Path, environment: bool = True) -> Path:
    """The active configuration's file: the one ``CLOUDSDK_ACTIVE_CONFIG_NAME`` names (when ``environment``), else
    the one ``active_config`` names, else ``default``."""
    name = os.environ.get(ENV_CONFIG_NAME) if environment else None
    if not name:
        try:
            name = (folder / "active_config").read_text().strip() or "default"
        except FileNotFoundError:
            name = "default"
    return folder / "configurations" / f"config_{name}"


def properties(folder: Path, environment: bool = True) -> dict:
    """The ``[core]`` properties of the active configuration in ``folder``: ``account``, ``project``; with
    ``environment``, as a call sees them (``CLOUDSDK_CORE_ACCOUNT`` over the file's account)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config_file(folder, environment))
    core = dict(parser["core"]) if parser.has_section("core") else {}
    if environment and os.environ.get(ENV_ACCOUNT):
        core["account"] = os.environ[ENV_ACCOUNT]
    return core


def set_properties(folder: Path, environment: bool = True, **values: str) -> None:
    """Set ``[core]`` properties of the active configuration in ``folder`` (as ``gcloud config set``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "active_config").exists():
        (folder / "active_config").write_text("default")
    path = config_file(folder, environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    if not parser.has_section("core"):
        parser.add_section("core")
    for key, value in values.items():
        parser.set("core", key, value)
    with open(path, "w") as out:
        parser.write(out)


def credentials(folder: Path) -> dict[str, dict]:
    """The credentials stored in ``folder``, by account."""
    database = folder / "credentials.db"
    if not database.is_file():
        return {}
    with contextlib.closing(sqlite3.connect(database)) as connection:
        rows = connection.execute("SELECT account_id, value FROM credentials").fetchall()
    return {str(account): json.loads(value) for account, value in rows}


def add_credentials(folder: Path, account: str, value: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(folder / "credentials.db")) as connection, connection:
        connection.execute('CREATE TABLE IF NOT EXISTS "credentials" (account_id TEXT PRIMARY KEY, value BLOB)')
        connection.execute("REPLACE INTO credentials VALUES (?, ?)", (account, json.dumps(value)))


def active_account(folder: Path) -> str | None:
    """The active account of the configuration in ``folder`` when it has credentials there."""
    try:
        account = properties(folder).get("account")
        return account if account and account in credentials(folder) else None
    except (OSError, configparser.Error, sqlite3.Error, ValueError):
        return None


def stdin_kind() -> str:
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return "closed"
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return "pipe"
    if os.isatty(0):
        return "tty"
    if stat.S_ISCHR(mode):
        return "null"
    return "file"


def take_failure(store: Store, argv: list[str]) -> Exit | None:
    """The injected failure (if any) whose prefix starts ``argv``; a counted one is used up."""
    with store.locked():
        state = store.load()
        for index, failure in enumerate(state["failures"]):
            prefix = failure["prefix"]
            if argv[: len(prefix)] != prefix:
                continue
            if failure["times"] is not None:
                failure["times"] -= 1
                if failure["times"] <= 0:
                    del state["failures"][index]
                store.save(state)
            stderr = failure["stderr"]
            return Exit(
                failure["code"],
                stderr if not stderr or stderr.endswith("\n") else stderr + "\n",
                failure.get("stdout", ""),
            )
    return None


def run_tool(tool: str, argv: list[str] | None, dispatch) -> int:
    """Record the call, apply an injected failure, else run ``dispatch(store, args)``; print and return its code."""
    args = list(sys.argv[1:] if argv is None else argv)
    store = Store(root_from_env())
    store.record(tool, args)
    try:
        failure = take_failure(store, [tool, *args])
        if failure is not None:
            raise failure
        code = dispatch(store, args) or 0
    except Exit as done:
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        code = done.code
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def accelerator_table(state: dict, zone: str) -> list[str]:
    if zone in state["accelerators"]:
        return list(state["accelerators"][zone])
    return list(DEFAULT_ZONE_ACCELERATORS.get(zone, []))


def prune(value):
    """Leave out what the Google APIs' JSON leaves out: false, 0, "", empty lists and empty objects."""
    if isinstance(value, dict):
        pruned = {key: prune(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item not in (None, False, 0, "", [], {})}
    if isinstance(value, list):
        return [prune(item) for item in value]
    return value


# ---- processes ------------------------------------------------------------------------------------------------


def proc_starttime(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a live, non-zombie process; None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int | None, starttime: int | None) -> bool:
    return bool(pid) and proc_starttime(pid) is not None and proc_starttime(pid) == starttime


def marked_pids(prefix: str) -> list[int]:
    """Live processes whose environment carries a job marker starting with ``prefix`` (ours only: other users'
    environments cannot be read)."""
    found = []
    needle = f"{ENV_JOB}={prefix}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(item.startswith(needle) for item in environ.split(b"\0")) and proc_starttime(int(entry.name)):
            found.append(int(entry.name))
    return found


def kill_group(pid: int | None, starttime: int | None, marker_prefix: str, timeout: float = 5.0) -> None:
    """SIGKILL the process group a run started (if its leader is still the one started) and every process
    carrying the run's marker, and wait until they are gone (zombies or no more). The marked processes are looked
    for before the kill, too: a process dying from it loses its environment, marker and all, before it turns
    zombie, so looking only afterwards can miss one that is still there."""
    seen = {other: proc_starttime(other) for other in marked_pids(marker_prefix)}
    if alive(pid, starttime):
        seen[pid] = starttime
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        for other in marked_pids(marker_prefix):
            seen.setdefault(other, proc_starttime(other))
        left = [other for other, started in seen.items() if alive(other, started)]
        if not left or time.monotonic() > deadline:
            return
        for other in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other, signal.SIGKILL)
        time.sleep(0.02)
