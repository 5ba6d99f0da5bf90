"""A Gymnasium monitor in an experiment (``"monitor": DIR`` on its environment) across the run's life: a resumed run
keeps the records of the part before and numbers its episodes on, a relative DIR lies in the results, a new run
starts them clean, and records of a part the resume rolled back stay. Real runs of the worker in this process
(see worker_runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.worker_runs import new_experiment, new_project, pause_at, records, run
from torchforce.client import Experiment, Project
from torchforce.spec import SpecError


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return new_project(tmp_path / "project")


def monitored(directory: str | Path, **options: object) -> dict:
    return {"type": "gym", "gym_id": "CartPole-v1", "monitor": str(directory), **options}


def numbers(games: list[dict]) -> list[int]:
    return [game["episode"] for game in games]


def without_seconds(games: list[dict]) -> list[dict]:
    return [{key: value for key, value in game.items() if key != "seconds"} for game in games]


@pytest.mark.parametrize(("vectorization", "copies"), [("sync", 1), ("sync", 2), ("subprocess", 2)])
def test_a_paused_and_resumed_run_appends_to_its_monitors_records(
    project, tmp_path, monkeypatch, vectorization, copies
):
    fields = {"total_timesteps": 600 * copies, "num_environments": copies, "vectorization": vectorization}
    folder = new_experiment(project, "watched", environment=monitored("monitor"), **fields)
    pause_at(monkeypatch, 300 * copies)
    assert run(folder) == "paused"
    first = records(folder / "results" / "monitor" / "episodes.jsonl")
    assert len(first) >= 10 and numbers(first) == list(range(len(first)))
    assert run(folder, resume=True) == "finished"
    games = records(folder / "results" / "monitor" / "episodes.jsonl")
    assert games[: len(first)] == first  # the first part's records, as they were
    assert len(games) >= 2 * len(first) - 4 and numbers(games) == list(range(len(games)))  # numbered on, once each
    # the copies' episodes, as the run counted them (the monitor leaves out those its time limit did not end)
    episodes = records(folder / "results" / "episodes.jsonl")
    ended = [episode["return"] for episode in episodes if episode["length"] < 60]
    assert [game["reward"] for game in games] == ended


def test_a_relative_monitor_lies_in_the_results_and_outlives_a_resume(project, monkeypatch):
    """The local backend's worker runs in a folder it empties at every start: a relative monitor goes under the
    results, where a resume finds it, and the next run of the experiment starts it clean."""
    folder = new_experiment(project, "relative", environment=monitored("monitor"), total_timesteps=600)
    pause_at(monkeypatch, 300)
    assert run(folder) == "paused"
    file = folder / "results" / "monitor" / "episodes.jsonl"
    first = records(file)
    assert first and not (project.root / "monitor").exists()
    assert run(folder, resume=True) == "finished"
    games = records(file)
    assert len(games) > len(first) and games[: len(first)] == first and numbers(games) == list(range(len(games)))
    assert run(folder) == "finished"  # a new run of it (as the worker starts one; --fresh removes the results too)
    assert without_seconds(records(file)) == without_seconds(games)  # the same games, recorded afresh


def test_a_resume_from_an_older_checkpoint_keeps_the_records_of_what_it_plays_again(project):
    """A run that ended after its last checkpoint (a crash) resumes from that checkpoint: the monitor keeps the
    games played since, which happened, and numbers the replayed ones after them; the run's own episode log is cut
    back to the checkpoint."""
    folder = new_experiment(project, "rolled", environment=monitored("monitor"), saver_frequency="400t")
    assert run(folder) == "finished"
    file = folder / "results" / "monitor" / "episodes.jsonl"
    before = records(file)
    checkpoints = folder / "results" / "checkpoints"
    pointer = json.loads((checkpoints / "latest.json").read_text())
    runner = json.loads((checkpoints / "000000000800" / "runner.json").read_text())["state"]["runner"]
    rolled_back = {**pointer, "timesteps": 800, "episodes": runner["global_episode"], "folder": "000000000800"}
    (checkpoints / "latest.json").write_text(json.dumps(rolled_back))
    assert run(folder, resume=True) == "finished"
    games = records(file)
    assert games[: len(before)] == before and numbers(games) == list(range(len(games)))
    replayed = games[len(before) :]
    assert replayed and len(games) > len(records(folder / "results" / "episodes.jsonl"))
    # the episodes after the checkpoint, played again exactly: the same games, recorded twice
    assert [game["reward"] for game in replayed] == [game["reward"] for game in before[-len(replayed) :]]


def test_a_new_experiment_leaves_the_records_alone_and_its_run_with_monitor_safe_refuses_them(project):
    """``experiment new`` builds the environment once to check it: its monitor in a scratch folder, not the run's.
    The run then starts the records afresh, or with monitor_safe refuses them."""
    folder = new_experiment(project, "safe", environment=monitored("monitor", monitor_safe=True))
    assert not (folder / "results" / "monitor").exists()
    (folder / "results" / "monitor").mkdir(parents=True)
    (folder / "results" / "monitor" / "episodes.jsonl").write_text('{"episode": 0}\n')
    with pytest.raises(SpecError, match=r"experiment\.environment\.monitor: .* already holds episode records"):
        run(folder)
    assert (folder / "results" / "monitor" / "episodes.jsonl").read_text() == '{"episode": 0}\n'
    own = new_experiment(project, "own", environment=monitored("."))
    with pytest.raises(SpecError, match=r"experiment\.environment\.monitor: the run's results folder itself"):
        run(own)


@pytest.mark.parametrize("monitor", ["{outside}", "../../outside", "monitor/../../../outside"])
def test_a_monitor_outside_the_results_is_refused_before_anything_is_cleared(project, tmp_path, monitor):
    """A spec from someone else named a monitor anywhere on the machine (an absolute path, or one that climbs out of
    the results with '..'), and the run cleared that folder's episodes.jsonl and wrote there. Refused: at
    ``experiment new``, and by the worker for a stored spec changed after it (nothing there touched)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "episodes.jsonl").write_text("someone's records\n")
    monitor = monitor.format(outside=outside)
    with pytest.raises(SpecError, match=r"experiment\.environment\.monitor: a monitor's directory is a folder of"):
        new_experiment(project, "escapes", environment=monitored(monitor))
    assert not (project.root / "experiments" / "escapes").exists()
    folder = new_experiment(project, "changed", environment=monitored("monitor"))
    stored = json.loads((folder / "experiment.json").read_text())
    stored["environment"]["monitor"] = monitor
    (folder / "experiment.json").write_text(json.dumps(stored))
    with pytest.raises(SpecError, match=r"experiment\.environment\.monitor: .*expected a relative path without"):
        Experiment.load(project, "changed").start()  # refused at the start, before a worker is launched
    assert project.store.experiment("changed").status == "new"
    with pytest.raises(SpecError, match=r"experiment\.environment\.monitor: .*expected a relative path without"):
        run(folder)  # and by the worker, should one be started all the same
    assert (outside / "episodes.jsonl").read_text() == "someone's records\n"
    assert sorted(path.name for path in outside.iterdir()) == ["episodes.jsonl"]
