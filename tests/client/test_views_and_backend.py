"""Small parts with exact expectations: progress fractions, the table format, the local backend's process checks
and signal masking, and the worker's progress log lines."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.client.conftest import fake_worker
from torchforce.client import Experiment
from torchforce.client.backends import local
from torchforce.client.commands.output import format_table
from torchforce.client.commands.views import environment_name, progress_fraction, short_return
from torchforce.client.experiment_run import ExperimentRun

# ---------------------------------------------------------------------------------------------- progress and tables


@pytest.mark.parametrize(
    ("spec", "progress", "status", "expected"),
    [
        ({"total_timesteps": 1000}, {"timesteps": 250, "episodes": 3}, "running", 0.25),
        ({"total_timesteps": 100000, "episodes": 8}, {"timesteps": 1200, "episodes": 6}, "running", 0.75),
        ({"total_timesteps": 1000, "episodes": 100}, {"timesteps": 500, "episodes": 10}, "paused", 0.5),
        ({"total_timesteps": None, "episodes": 10}, {"timesteps": 99, "episodes": 5}, "running", 0.5),
        ({"total_timesteps": 100000, "episodes": 8}, {"timesteps": 1200, "episodes": 7}, "finished", 1.0),
        ({"total_timesteps": 1000}, {"timesteps": 1004}, "running", 1.0),
        ({"total_timesteps": 1000}, {}, "new", 0.0),
        ({"total_timesteps": None, "episodes": None}, {"timesteps": 5}, "running", None),
    ],
)
def test_progress_is_the_larger_fraction_and_complete_once_finished(spec, progress, status, expected):
    assert progress_fraction(spec, progress, status) == expected


@pytest.mark.parametrize(
    ("environment", "name"),
    [
        ({"type": "atari", "game": "Breakout", "frame_skip": 4}, "Atari(Breakout)"),
        ({"type": "gym", "gym_id": "HalfCheetah-v5"}, "HalfCheetah-v5"),
        ({"type": "minimal_test"}, "minimal_test"),
    ],
)
def test_list_and_show_name_what_the_experiment_plays(environment, name):
    assert environment_name({"environment": environment}) == name


@pytest.mark.parametrize(
    ("value", "shown"),
    [(-23.8908, "-23.89"), (-8.02694, "-8.03"), (22.5, "22.5"), (500.0, "500"), (1.0, "1"), (-0.001, "0"), (0.0, "0")],
)
def test_show_gives_recent_returns_to_two_decimals_at_most(value, shown):
    assert short_return(value) == shown


def test_numeric_columns_stay_right_aligned_when_a_row_shows_a_dash():
    table = format_table(
        ["Name", "Progress", "Mean"], [["a", "12%", "-3.5"], ["bb", None, None], ["c", "100%", "200.0"]]
    )
    assert table.splitlines() == [
        "Name  Progress   Mean",
        "----  --------  -----",
        "a          12%   -3.5",
        "bb           -      -",
        "c         100%  200.0",
    ]


# ---------------------------------------------------------------------------------------------- the local backend


@pytest.fixture
def without_proc(monkeypatch, tmp_path):
    """The backend as on macOS: no /proc, so it asks ``ps``."""
    monkeypatch.setattr(local, "PROC", tmp_path / "no-proc")


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "ps"])
def test_process_alive_knows_a_worker_from_other_processes(tmp_path, request, proc):
    if not proc:
        request.getfixturevalue("without_proc")
    folder = tmp_path / "experiments" / "one"
    with fake_worker(folder) as pid:
        assert local.process_alive(pid) and local.process_alive(pid, folder)
        assert not local.process_alive(pid, tmp_path / "experiments" / "other")
        assert not local.process_alive(pid, tmp_path / "experiments" / "on")  # a whole argument, not a prefix
    assert not local.process_alive(pid)  # ended
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not local.process_alive(other.pid)  # alive, but not a worker (a reused PID)
    finally:
        other.kill()
        other.wait()
    assert not local.process_alive(None)


def test_without_ps_a_live_process_with_the_workers_pid_is_taken_for_it(tmp_path, without_proc, monkeypatch):
    def no_ps(*args, **kwargs):
        raise FileNotFoundError("ps")

    monkeypatch.setattr(local.subprocess, "run", no_ps)
    with fake_worker(tmp_path) as pid:
        assert local.process_alive(pid, tmp_path)
    assert not local.process_alive(pid)


def test_a_worker_starts_with_its_signals_blocked_and_unblocks_them_once_it_handles_them():
    show_mask = "import signal; print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with local.worker_signals_blocked():
        child = subprocess.run([sys.executable, "-c", show_mask], capture_output=True, text=True, check=True)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before  # the caller's mask is back
    assert {int(s) for s in local.WORKER_SIGNALS} <= set(eval(child.stdout))  # noqa: S307 - a list of ints
    # a pause sent while the worker starts is pending until it installs its handlers, then it is handled
    early_pause = (
        "import os, signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1}); "
        "os.kill(os.getpid(), signal.SIGUSR1); from torchforce.client.signals import Signals; "
        "Signals.install(); print(Signals.request, signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, []))"
    )
    handled = subprocess.run([sys.executable, "-c", early_pause], capture_output=True, text=True, timeout=60)
    assert (handled.returncode, handled.stdout.split()) == (0, ["pause", "False"]), handled.stderr


# ---------------------------------------------------------------------------------------------- the worker's log


def test_the_worker_logs_a_progress_line_at_most_every_few_seconds(project, monkeypatch, caplog):
    experiment = Experiment(project, name="logged", agent="random", environment="cartpole", total_timesteps=100)
    (project.root / "configs" / "agents" / "random.json").write_text('{"type": "random"}')
    run = ExperimentRun(experiment.generate_locally(), resume=False)
    run.runner = SimpleNamespace(global_timestep=0, global_episode=0)
    clock = [1000.0]
    monkeypatch.setattr("torchforce.client.experiment_run.time.monotonic", lambda: clock[0])
    run._logged = {"seconds": clock[0], "timesteps": 0}
    caplog.set_level(logging.INFO, logger="torchforce.worker")

    run.runner.global_timestep, run.runner.global_episode = 2000, 10
    run.recent.extend([10.0, 30.0])
    clock[0] += 1.0
    run.log_progress()
    assert caplog.messages == []  # too soon
    clock[0] += 4.0
    run.log_progress()
    assert caplog.messages == ["episode 10, timesteps 2000, 400 steps/s, mean return (last 2) 20.00"]
    run.runner.global_timestep = 2600
    clock[0] += 0.5
    run.log_progress()
    run.log_progress(force=True)  # the end of a run: always
    assert caplog.messages[1:] == ["episode 10, timesteps 2600, 1200 steps/s, mean return (last 2) 20.00"]
