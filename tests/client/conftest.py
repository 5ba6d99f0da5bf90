"""Fixtures for the client tests: a fresh project in a temporary folder, and the real tfcli as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.client.gke_common import PROJECT, ZONE, key_file
from tests.fakecloud import FakeCloud
from torchforce.client import Experiment, Project
from torchforce.client.gcloud import ACCOUNT_OVERRIDES, CONFIG_VARIABLE


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    created, _ = Project.init(root)
    yield created
    kill_workers(created)


def kill_workers(project: Project) -> None:
    """Never leave a worker behind: kill those the state database or a progress file names, if still ours."""
    from torchforce.client.backends.local import process_alive

    for record in project.store.experiments():
        folder = project.experiment_folder(record.name)
        for pid in {record.pid, Experiment.load(project, record.name, damaged=True).progress().get("pid")}:
            if pid and process_alive(pid, folder):
                os.kill(pid, 9)


def tfcli(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real command line in ``root``."""
    return subprocess.run(
        [sys.executable, "-m", "torchforce", *args], cwd=root, capture_output=True, text=True, timeout=timeout
    )


def wait_for(condition, timeout: float = 120.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_until_done(experiment: Experiment, timeout: float = 180.0) -> str:
    record = wait_for(lambda: (r := experiment.record()).status != "running" and r, timeout, 0.2, "the worker to end")
    return record.status


@contextmanager
def fake_worker(folder: Path, script: str = "import time; time.sleep(60)") -> Iterator[int]:
    """A live process that the local backend takes for the worker of the experiment in ``folder`` (its command
    line names the worker module and the folder, as a real worker's does)."""
    command = [sys.executable, "-c", script, "torchforce.client.worker", str(folder.resolve())]
    process = subprocess.Popen(command)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + 10
    while cmdline.parent.is_dir() and time.monotonic() < deadline:  # until it has exec'd: its command line is ours
        try:
            if b"torchforce.client.worker" in cmdline.read_bytes():
                break
        except OSError:  # it has ended already
            break
        time.sleep(0.01)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def template_project(tmp_path_factory: pytest.TempPathFactory, name: str, total_timesteps: int) -> Path:
    """A project with one experiment ``name`` (its agent built once), for module fixtures to copy per test."""
    root = tmp_path_factory.mktemp("template") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        project, _ = Project.init(root)
        Experiment(
            project, name=name, agent="ppo_cartpole", environment="cartpole", total_timesteps=total_timesteps
        ).generate_locally()
    return root


def copied_project(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of a template project (without SQLite's side files), made the current folder."""
    copy = tmp_path / "project"
    shutil.copytree(template, copy, ignore=shutil.ignore_patterns("*-wal", "*-shm"))
    monkeypatch.chdir(copy)
    return copy


# what would choose another gcloud configuration or account than the fake user's (gcloud reads them from the
# environment): the configuration folder, and what tfcli leaves out of its own calls
GCLOUD_SETTINGS = (CONFIG_VARIABLE, *ACCOUNT_OVERRIDES)


@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The fake Google Cloud (tests/fakecloud): fake gcloud and kubectl first on PATH; every process it started is
    ended afterwards. The user is logged in to gcloud as themselves in their default configuration (the fake's
    ``user_config``), and tfcli keeps its own gcloud configurations under the test's folder (``XDG_CONFIG_HOME``)."""
    fake = FakeCloud(tmp_path / "cloud")
    monkeypatch.setenv("TFCLI_FAKE_CLOUD", str(fake.root))
    monkeypatch.setenv("PATH", f"{fake.root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in GCLOUD_SETTINGS:  # this shell's gcloud settings are not the fake user's
        monkeypatch.delenv(name, raising=False)
    try:
        yield fake
    finally:
        fake.stop_all()


@pytest.fixture
def linked(project: Project, cloud: FakeCloud, tmp_path: Path) -> Project:
    """The project, linked to the fake Google Cloud project with a service account key."""
    key = key_file(tmp_path)
    done = tfcli(project.root, "gcloud", "link", "-r", PROJECT, "--key-file", str(key), "--zone", ZONE)
    assert done.returncode == 0, done.stderr
    return Project(project.root)
