"""The worker's flags for runs that a cluster restarts and suspends by itself (the GKE backend's RayJobs):
``--resume-if-any`` and ``--hold-after-pause``. Real worker processes on tiny CartPole runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.client.conftest import wait_for
from torchforce.client import Experiment, Project
from torchforce.client.checkpoints import Checkpoints

NAME = "flags"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of a fresh experiment (PPO on CartPole, 400 timesteps) of a new project."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    project, _ = Project.init(root)
    experiment = Experiment(
        project, name=NAME, agent="ppo_cartpole", environment="cartpole", total_timesteps=400, seed=3
    )
    experiment.generate_locally()
    return experiment.folder


@contextmanager
def worker(folder: Path, *flags: str) -> Iterator[subprocess.Popen]:
    """A worker process on ``folder``; it and any child it names in progress.json are killed at the end."""
    command = [sys.executable, "-I", "-m", "torchforce.client.worker", str(folder), "--log-file", *flags]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process
    finally:
        child = progress(folder).get("pid")
        if child and child != process.pid:  # a supervised run's worker
            with_process_gone(child)
        if process.poll() is None:
            process.kill()
        process.wait()


def with_process_gone(pid: int) -> None:
    """Kill ``pid`` if it is still a worker of this test (a child of the worker started here)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"torchforce.client.worker" in command:
        os.kill(pid, signal.SIGKILL)


def progress(folder: Path) -> dict:
    try:
        return json.loads((folder / "results" / "progress.json").read_text())
    except (OSError, ValueError):
        return {}


def episodes(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results" / "episodes.jsonl").read_text().splitlines()]


def log(folder: Path) -> str:
    return (folder / "results" / "worker.log").read_text()


def set_total_timesteps(folder: Path, total: int) -> None:
    spec = json.loads((folder / "experiment.json").read_text())
    (folder / "experiment.json").write_text(json.dumps({**spec, "total_timesteps": total}))


def request(folder: Path, what: str) -> None:
    (folder / "results" / "control.json").write_text(json.dumps({"request": what}))


def test_resume_if_any_without_a_checkpoint_starts_a_new_run(folder):
    # an earlier attempt that died before its first checkpoint left an episode: a new run drops it
    (folder / "results").mkdir()
    (folder / "results" / "episodes.jsonl").write_text(json.dumps({"episode": 1, "timesteps": 99}) + "\n")
    with worker(folder, "--resume-if-any") as process:
        assert process.wait(timeout=60) == 0
    assert "--resume-if-any: no checkpoint, starting a new run" in log(folder)
    assert "dropping what an earlier attempt that left no checkpoint logged (1 episodes)" in log(folder)
    assert progress(folder)["state"] == "finished" and progress(folder)["timesteps"] == 400
    logged = episodes(folder)
    assert [e["episode"] for e in logged] == list(range(1, len(logged) + 1))
    assert logged[0]["timesteps"] == logged[0]["length"]  # the new run's first episode, not the one left over
    assert Checkpoints(folder / "results" / "checkpoints").latest()["timesteps"] == 400


def test_resume_if_any_continues_from_the_checkpoint_also_when_supervised(folder):
    with worker(folder, "--resume-if-any") as process:
        assert process.wait(timeout=60) == 0
    first = episodes(folder)
    assert first and progress(folder)["timesteps"] == 400
    set_total_timesteps(folder, 800)
    # --max-restarts runs the worker as a child: the flag is passed on to it
    with worker(folder, "--resume-if-any", "--max-restarts", "1") as process:
        assert process.wait(timeout=60) == 0
    assert "--resume-if-any: resuming from the checkpoint at timestep 400" in log(folder)
    assert progress(folder)["state"] == "finished" and progress(folder)["timesteps"] == 800
    logged = episodes(folder)
    assert logged[: len(first)] == first  # the first run's episodes stay, and the log goes on after them
    assert [e["episode"] for e in logged] == list(range(1, len(logged) + 1))
    later = logged[len(first) :]
    assert later and all(e["timesteps"] > 400 for e in later)
    assert [e["timesteps"] for e in logged] == sorted(e["timesteps"] for e in logged)
    assert Checkpoints(folder / "results" / "checkpoints").latest()["timesteps"] == 800


def paused_and_held(folder: Path, process: subprocess.Popen) -> None:
    """Wait until the worker has paused; check it has a checkpoint and holds (still alive, asleep)."""
    wait_for(lambda: progress(folder).get("state") == "paused", 60, what="the pause")
    latest = Checkpoints(folder / "results" / "checkpoints").latest()
    assert latest is not None and latest["timesteps"] == progress(folder)["timesteps"]
    wait_for(lambda: "paused; holding (--hold-after-pause)" in log(folder), 10, what="the hold")
    time.sleep(2.5)
    assert process.poll() is None, "the worker exited instead of holding"
    assert not (folder / "results" / "control.json").exists()  # the pause was answered


@pytest.mark.slow
def test_hold_after_pause_holds_until_a_stop_request(folder):
    set_total_timesteps(folder, 10**7)
    with worker(folder, "--resume-if-any", "--hold-after-pause") as process:
        wait_for(lambda: progress(folder).get("timesteps", 0) > 0, 60, what="the run to start")
        request(folder, "pause")
        paused_and_held(folder, process)
        at = progress(folder)["timesteps"]
        request(folder, "pause")  # asked again: changes nothing
        time.sleep(1.5)
        assert process.poll() is None and progress(folder)["state"] == "paused"
        request(folder, "stop")
        assert process.wait(timeout=10) == 0
    assert progress(folder)["state"] == "stopped" and progress(folder)["timesteps"] == at
    assert Checkpoints(folder / "results" / "checkpoints").latest()["timesteps"] == at  # the pause's checkpoint
    assert not (folder / "results" / "control.json").exists()
    assert "stop requested while holding" in log(folder)


def test_sigterm_while_holding_exits_leaving_the_run_paused(folder):
    set_total_timesteps(folder, 10**7)
    # supervised: the supervisor passes the flag on, and SIGTERM on to the holding child
    with worker(folder, "--hold-after-pause", "--max-restarts", "2") as process:
        wait_for(lambda: progress(folder).get("timesteps", 0) > 0, 60, what="the run to start")
        os.kill(process.pid, signal.SIGUSR1)
        paused_and_held(folder, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert progress(folder)["state"] == "paused"
    assert "SIGTERM while holding: exiting, experiment flags stays paused" in log(folder)
    assert "restart 1 of" not in log(folder)


def test_a_supervised_run_whose_supervisor_is_killed_stops_at_a_checkpoint(tmp_path, monkeypatch):
    """--max-restarts runs the worker as the child of a supervisor, whose PID is the run's (the one tfcli prints).
    Killed with -9, the supervisor left its child training on unsupervised while the run read failed, for good, even
    once the child had finished. Now the child is asked to stop when its supervisor dies: it checkpoints, the run
    reads running until then and stopped after, and resumes from there."""
    from tests.client.conftest import kill_workers

    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    project, _ = Project.init(root)
    experiment = Experiment(
        project, name="supervised", agent="ppo_cartpole", environment="cartpole", total_timesteps=300_000, seed=3
    )
    experiment.generate_locally()
    try:
        experiment.start(max_restarts=2)
        supervisor = experiment.record().pid

        def training_child() -> int | None:
            state = experiment.progress()
            return state["pid"] if state.get("pid") not in (None, supervisor) and state.get("timesteps") else None

        child = wait_for(training_child, 120, what="the supervised worker's progress")
        os.kill(supervisor, signal.SIGKILL)
        assert experiment.record().status in ("running", "stopped")  # never failed while its worker checkpoints
        record = wait_for(lambda: (r := experiment.record()).status != "running" and r, 120, what="the run's end")
        assert record.status == "stopped", record.message
        wait_for(lambda: not Path(f"/proc/{child}").exists(), 30, what="the worker to exit")
        latest = Checkpoints(experiment.results / "checkpoints").latest()
        assert latest is not None and 0 < latest["timesteps"] == experiment.progress()["timesteps"] < 300_000
        assert "stop requested" in (experiment.results / "worker.log").read_text()
    finally:
        kill_workers(project)
