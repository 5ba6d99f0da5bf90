"""``tfcli sweep delete``: a sweep could not be removed at all (its name, its trials' names and its list entry were
taken for good). It is removed with its trials' experiments, or without them (``--keep-trials``), and refused while
anything of it runs."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from tests.client.conftest import fake_worker
from tests.client.test_bad_input import bad
from tests.client.test_sweep import LONG, crash, running_run, stop_everything, sweep_file, trial_with_runs, write
from torchforce.client import Experiment, Project
from torchforce.client.backends.local import process_alive
from torchforce.client.cli import main
from torchforce.client.sweep import Sweep

pytest.importorskip("optuna")

FLAGS = ["-A", "vpg_cartpole", "-E", "cartpole", "-t", "1500"]


@pytest.fixture
def sweeps(project: Project):
    yield project
    stop_everything(project)


def made(project: Project, capsys: pytest.CaptureFixture) -> Sweep:
    """Sweep 'lr' (two seeds a trial) with trial 0's runs finished and trial 1's new, none of them running, and
    an experiment of the user's named like it but not its trial's."""
    write(project.root, "lr.json", json.dumps(sweep_file(seeds_per_trial=2)))
    assert main(["sweep", "new", "-f", "lr.json"]) == 0
    sweep = Sweep.load(project, "lr")
    study = sweep.study()
    trial_with_runs(sweep, study, "finished", [10.0, 20.0])
    trial_with_runs(sweep, study, "new")
    assert main(["experiment", "new", "-n", "lr-tuned", *FLAGS]) == 0
    capsys.readouterr()
    return sweep


def sweep_files(project: Project) -> list[str]:
    return sorted(path.name for path in Sweep.folder_of(project).iterdir())


RUNS = ["lr-t000-s0", "lr-t000-s1", "lr-t001-s0", "lr-t001-s1"]


def test_delete_removes_the_sweep_and_its_trials_and_frees_their_names(sweeps, capsys):
    sweep = made(sweeps, capsys)
    sweep.plots_folder.mkdir()
    (sweep.plots_folder / "history.png").write_bytes(b"png")
    sweep.log_file.write_text("log\n")
    best = sweeps.root / "configs" / "experiments" / "lr-best.json"
    best.write_text("{}")  # the user's now: kept
    assert main(["sweep", "delete", "--sweep", "lr"]) == 0
    out = capsys.readouterr().out
    assert out == "".join(f"Deleted experiment '{name}'\n" for name in RUNS) + (
        "Deleted sweep 'lr'\nKept configs/experiments/lr-best.json, its best trial's experiment\n"
    )
    assert sweep_files(sweeps) == [] and Sweep.names(sweeps) == []
    assert [record.name for record in sweeps.store.experiments()] == ["lr-tuned"]
    assert sorted(path.name for path in (sweeps.root / "experiments").iterdir()) == ["lr-tuned"]
    assert best.read_text() == "{}"
    assert main(["sweep", "list"]) == 0 and "No sweeps yet" in capsys.readouterr().out
    assert "no sweep named 'lr'" in bad(sweeps.root, capsys, "sweep", "delete", "--sweep", "lr")
    assert main(["experiment", "new", "-n", "lr-t001-s0", *FLAGS]) == 0  # no longer the sweep's
    capsys.readouterr()
    assert main(["experiment", "delete", "-e", "lr-t001-s0"]) == 0
    assert main(["sweep", "new", "-f", "lr.json"]) == 0  # the name is free again: a new study, no trials
    assert Sweep.load(sweeps, "lr").trials() == []


def test_keep_trials_leaves_them_as_ordinary_experiments(sweeps, capsys):
    made(sweeps, capsys)
    assert main(["sweep", "delete", "--sweep", "lr", "--keep-trials"]) == 0
    out = capsys.readouterr().out
    assert out == f"Deleted sweep 'lr'\nKept its trials' experiments, now ordinary ones: {', '.join(RUNS)}\n"
    assert sweep_files(sweeps) == []
    assert sorted(record.name for record in sweeps.store.experiments()) == [*RUNS, "lr-tuned"]
    assert Experiment.load(sweeps, "lr-t000-s0").checked_spec["group"] == "lr-t000"
    assert Sweep.owner_of_name(sweeps, "lr-t000-s0") is None
    assert main(["experiment", "new", "-n", "lr-t007-s0", *FLAGS]) == 0  # its trials' names are anyone's now
    capsys.readouterr()
    err = bad(sweeps.root, capsys, "sweep", "new", "-f", "lr.json")  # until its kept trials go
    assert "experiments named like the runs of a sweep 'lr' already" in err
    assert main(["experiment", "delete", "-e", "lr-t000"]) == 0  # a kept trial is a group as any other


def test_delete_is_refused_while_the_driver_runs(sweeps, capsys):
    sweep = made(sweeps, capsys)
    descriptor = os.open(sweep.lock_file, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # what a running driver holds
        err = bad(sweeps.root, capsys, "sweep", "delete", "--sweep", "lr")
    finally:
        os.close(descriptor)
    assert err == (
        "tfcli: sweep 'lr' is running; nothing was deleted\n  Stop it first with 'tfcli sweep stop --sweep lr'.\n"
    )
    assert Sweep.names(sweeps) == ["lr"]


def test_delete_is_refused_while_a_trial_s_run_runs(sweeps, capsys):
    sweep = made(sweeps, capsys)
    with fake_worker(sweeps.experiment_folder("lr-t001-s1")) as pid:
        assert sweeps.store.update_experiment("lr-t001-s1", status="running", pid=pid)
        for flags in ([], ["--keep-trials"]):
            err = bad(sweeps.root, capsys, "sweep", "delete", "--sweep", "lr", *flags)
            assert err.startswith(
                "tfcli: sweep 'lr' has runs that are not over: lr-t001-s1 (running); nothing was deleted\n"
            )
            assert "tfcli sweep stop --sweep lr" in err
    assert sorted(sweep_files(sweeps)) == ["lr.db", "lr.json", "lr.lock"]
    assert sweep.trials()[0].experiments == ["lr-t000-s0", "lr-t000-s1"]


@pytest.mark.parametrize("study", ["damaged", "gone"])
def test_a_sweep_whose_study_is_damaged_or_gone_is_deleted_all_the_same(sweeps, capsys, study):
    """Its state file goes last: a deletion cut short after the study went is finished by deleting it again."""
    sweep = made(sweeps, capsys)
    if study == "damaged":
        sweep.database.write_bytes(b"not a database")
    else:
        sweep.database.unlink()
    assert sweep.delete() == RUNS
    assert sweep_files(sweeps) == [] and [record.name for record in sweeps.store.experiments()] == ["lr-tuned"]


def refused(capsys: pytest.CaptureFixture, *argv: str) -> str:
    """``tfcli argv``'s message, checking it exits 2 (``bad`` cannot check that nothing changed: a run is going)."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.slow
def test_a_real_sweep_is_deleted_once_stopped_and_not_before(sweeps, capsys):
    """With its real driver and worker: refused while they run, and after a crash while the run goes on without
    its driver; deleted once stopped, leaving no process, file or run behind."""
    write(sweeps.root, "long.yaml", LONG)
    assert main(["sweep", "new", "-f", "long.yaml", "--start"]) == 0
    sweep = Sweep.load(sweeps, "tiny")
    run = running_run(sweeps, "tiny")
    worker = run.record().pid
    capsys.readouterr()
    err = refused(capsys, "sweep", "delete", "--sweep", "tiny")
    assert err.startswith("tfcli: sweep 'tiny' is running; nothing was deleted")
    crash(sweep)  # the run goes on without its driver
    err = refused(capsys, "sweep", "delete", "--sweep", "tiny", "--keep-trials")
    assert err.startswith("tfcli: sweep 'tiny' has runs that are not over: tiny-t000-s0 (running)")
    assert Sweep.names(sweeps) == ["tiny"] and process_alive(worker, run.folder)
    assert main(["sweep", "stop", "--sweep", "tiny"]) == 0
    assert not process_alive(worker, run.folder)
    capsys.readouterr()
    assert main(["sweep", "delete", "--sweep", "tiny"]) == 0
    assert capsys.readouterr().out == "Deleted experiment 'tiny-t000-s0'\nDeleted sweep 'tiny'\n"
    assert sweep_files(sweeps) == [] and sweeps.store.experiments() == []
    assert list((sweeps.root / "experiments").iterdir()) == []
