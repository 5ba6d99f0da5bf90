"""Concurrent tfcli calls: the state database stays consistent and no half-made experiment is left behind."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.client.conftest import tfcli, wait_for
from torchforce.client import ClientError, Experiment, Project
from torchforce.client.store import Store

# A random agent on CartPole: the cheapest experiment to validate (no optimizer, so no torch._dynamo import), as
# what is tested here is the bookkeeping, not the agent.
CHEAP = ["-A", "random", "-E", "cartpole", "-t", "1000"]


def launch(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "torchforce", *args],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, out, err


def assert_consistent(root: Path, names: list[str]) -> None:
    """Exactly ``names`` in the database and on disk, each with a valid spec, and no staging folder left."""
    project = Project(root)
    assert project.store.check() == "ok"
    assert sorted(record.name for record in project.store.experiments()) == sorted(names)
    assert all(record.status == "new" for record in project.store.experiments())
    assert sorted(path.name for path in project.experiments_folder.iterdir()) == sorted(names)
    for name in names:
        spec = json.loads((project.experiment_folder(name) / "experiment.json").read_text())
        assert spec["name"] == name and spec["agent"]["type"] == "random" and spec["total_timesteps"] == 1000


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    assert tfcli(root, "init").returncode == 0
    (root / "configs" / "agents" / "random.json").write_text('{"type": "random"}\n')
    return root


@pytest.mark.slow
def test_twenty_concurrent_new_and_list_calls_leave_a_consistent_database(root):
    names = [f"run-{i}" for i in range(10)]
    creators = [launch(root, "experiment", "new", "-n", name, *CHEAP) for name in names]
    # The lists start once the first experiment is being written, so they overlap the others' writes (a
    # listing that meets a row whose folder is still being staged must neither fail nor show it half-made).
    store = Store(root / ".tfcli" / "state.db")
    wait_for(lambda: store.experiments() or any(p.poll() is not None for p in creators), timeout=240, interval=0.02)
    listers = [launch(root, "experiment", "list", "--json") for _ in range(10)]
    created = [finish(p) for p in creators]
    listed = [finish(p) for p in listers]

    for (code, out, err), name in zip(created, names, strict=True):
        assert code == 0, err
        assert f"Created experiment '{name}'" in out
    for code, out, err in listed:
        assert code == 0, err
        rows = json.loads(out)
        assert {row["name"] for row in rows} <= set(names)
        assert all(row["status"] == "new" and row["agent"] == "random" for row in rows), rows
    assert_consistent(root, names)
    final = tfcli(root, "experiment", "list", "--json")
    assert final.returncode == 0 and sorted(row["name"] for row in json.loads(final.stdout)) == sorted(names)


def test_concurrent_creations_of_the_same_name_make_it_once(root):
    # Threads in one process race through the same staging, insert and rename steps as separate tfcli calls do,
    # without paying for a Python and PyTorch start each.
    project = Project(root)
    experiments = [
        Experiment(project, name="same", agent="random", environment="cartpole", total_timesteps=1000) for _ in range(6)
    ]
    barrier = threading.Barrier(len(experiments))
    outcomes: list[str] = []

    def create(experiment: Experiment) -> None:
        experiment.validate()  # the slow part (building), before the race
        barrier.wait()
        try:
            experiment.generate_locally()
            outcomes.append("created")
        except ClientError as error:
            outcomes.append(error.message)

    threads = [threading.Thread(target=create, args=(experiment,)) for experiment in experiments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("created") == 1, outcomes
    assert all(outcome.startswith("experiment 'same' already exists") for outcome in outcomes if outcome != "created")
    assert_consistent(root, ["same"])


def test_a_compare_and_set_has_exactly_one_winner(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_experiment("race")
    barrier = threading.Barrier(16)
    wins = []

    def start() -> None:
        barrier.wait()
        wins.append(store.update_experiment("race", expect=("new",), status="running", pid=os.getpid()))

    threads = [threading.Thread(target=start) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 15 + [True]
    assert store.experiment("race").status == "running" and store.check() == "ok"


def test_concurrent_writers_and_readers_in_threads(tmp_path):
    store = Store(tmp_path / "state.db")
    names = [f"t{i}" for i in range(24)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def add(name: str) -> None:
        try:
            store.add_experiment(name)
            store.update_experiment(name, status="paused", message="x" * 1000)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def read() -> None:
        while not stop.is_set():
            try:
                rows = store.experiments()
                assert len({row.name for row in rows}) == len(rows)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
            time.sleep(0.001)

    readers = [threading.Thread(target=read) for _ in range(4)]
    writers = [threading.Thread(target=add, args=(name,)) for name in names]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in readers:
        thread.join()
    assert errors == []
    assert sorted(record.name for record in store.experiments()) == sorted(names)
    assert {record.status for record in store.experiments()} == {"paused"}
    assert store.check() == "ok"
    with pytest.raises(sqlite3.IntegrityError):
        store.add_experiment("t0")


def test_a_listing_skips_an_experiment_being_created_and_shows_a_damaged_one(root, monkeypatch, capsys):
    from torchforce.client.cli import main

    store = Project(root).store
    store.add_experiment("staging")  # its row is in; its folder is still being staged by another call
    (root / "experiments" / ".staging.k2j4h1").mkdir()
    store.add_experiment("gone")  # its folder was removed by hand
    store.add_experiment("garbled")
    (root / "experiments" / "garbled").mkdir()
    (root / "experiments" / "garbled" / "experiment.json").write_text("{")
    monkeypatch.chdir(root)
    assert main(["experiment", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == ["gone", "garbled"]
    assert rows[0]["message"] == "experiments/gone/experiment.json is missing"
    assert rows[1]["message"].startswith("experiments/garbled/experiment.json is unreadable (")
    assert main(["experiment", "list"]) == 0
    table = capsys.readouterr().out
    assert "gone" in table and "garbled" in table and "staging" not in table
