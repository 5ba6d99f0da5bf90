"""Fixtures for the client tests: a fresh project in a temporary folder, and the real tfcli as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchforce.client import Experiment, Project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    created, _ = Project.init(root)
    yield created
    for record in created.store.experiments():  # never leave a worker behind
        if record.pid:
            try:
                os.kill(record.pid, 9)
            except ProcessLookupError:
                pass


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
