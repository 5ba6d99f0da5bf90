"""MLflow tracking (the experiment's ``mlflow`` field): its validation (mlflow is optional: ``experiment new`` says
how to install it), and runs mirrored into a real local file store: parameters, per-episode metrics sent in
batches, evaluations, the final checkpoint as an artifact, the run's status, and a resumed run that sends nothing
twice. The store tests are skipped where mlflow cannot be imported."""

from __future__ import annotations

import importlib.util
import json
import logging
import warnings
from pathlib import Path

import pytest

from tests.client.worker_runs import new_experiment, new_project, records, run, set_fields
from torchforce.client import Project, tracking
from torchforce.client.cli import main
from torchforce.client.experiment_file import resolve_experiment
from torchforce.client.tracking import flat_params
from torchforce.spec import SpecError, SpecWarning

needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow is not installed")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # (the worker sets it for a file store; kept to the test)
    return new_project(tmp_path / "project")


def store(project: Project) -> dict:
    return {"tracking_uri": (project.root / "mlruns").as_uri(), "experiment": "cartpole-study"}


def client(project: Project):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store(project)["tracking_uri"])


def run_id(folder: Path) -> str:
    return json.loads((folder / "results" / "mlflow.json").read_text())["run_id"]


def history(project: Project, folder: Path, metric: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client(project).get_metric_history(run_id(folder), metric)]


# ---------------------------------------------------------------------------------------------- the spec


def resolve(project: Project, mlflow, *, build: bool = False) -> dict:
    raw = {"name": "spec", "agent": "small_ppo", "environment": "cartpole", "total_timesteps": 1000, "mlflow": mlflow}
    return resolve_experiment(project, raw, build=build)


def test_the_mlflow_field_defaults_to_off_and_its_experiment_to_the_projects_name(project):
    assert resolve(project, None)["mlflow"] is None
    assert resolve(project, {"tracking_uri": "sqlite:////srv/mlflow.db"})["mlflow"] == {
        "tracking_uri": "sqlite:////srv/mlflow.db",
        "experiment": project.name,
    }


@pytest.mark.parametrize(
    ("mlflow", "path", "words"),
    [
        ({"experiment": "x"}, "experiment.mlflow.tracking_uri", "MLflow needs a tracking URI"),
        ({"tracking_uri": "mlruns"}, "experiment.mlflow.tracking_uri", "a relative store"),
        ({"tracking_uri": "file:mlruns"}, "experiment.mlflow.tracking_uri", "a relative store"),
        ({"tracking_uri": "sqlite:///mlflow.db"}, "experiment.mlflow.tracking_uri", "a relative store"),
        ({"tracking_uri": "file:///m", "experimnt": "x"}, "experiment.mlflow.experimnt", "Did you mean 'experiment'?"),
        ({"tracking_uri": "file:///m", "experiment": 5}, "experiment.mlflow.experiment", "got 5"),
        ("file:///m", "experiment.mlflow", "file:///m"),
    ],
)
def test_a_bad_mlflow_field_is_an_error_naming_it(project, mlflow, path, words):
    with pytest.raises(SpecError) as caught:
        resolve(project, mlflow)
    assert caught.value.path == path
    assert words in str(caught.value)


def test_experiment_new_says_how_to_install_mlflow_when_it_is_missing(project, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None if name == "mlflow" else real(name))
    file = project.root / "tracked.json"
    spec = {"name": "tracked", "environment": "cartpole", "agent": "small_ppo", "mlflow": store(project)}
    file.write_text(json.dumps(spec))
    assert main(["experiment", "new", "-f", str(file)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert (
        err.startswith("tfcli: experiment.mlflow: MLflow tracking needs the mlflow package, which is not installed")
        and "pip install torchforce[mlflow]" in err
    )
    assert not project.experiment_folder("tracked").exists() and project.store.experiment("tracked") is None
    # a stored experiment is still read where mlflow is missing (listing, showing it): only 'new' needs it
    monkeypatch.undo()
    monkeypatch.chdir(project.root)
    new_experiment(project, "stored", mlflow=store(project))
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None if name == "mlflow" else real(name))
    assert main(["experiment", "show", "-e", "stored", "--json"]) == 0


def test_flat_params_name_every_scalar_by_its_path():
    spec = {"agent": {"type": "ppo", "network": [{"size": 16}, {"size": 8, "bias": None}]}, "seed": 3, "x": None}
    assert flat_params(spec) == {"agent.type": "ppo", "agent.network.0.size": 16, "agent.network.1.size": 8, "seed": 3}


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://alice:s3cret@mlflow.example.com:5000/path", "https://***@mlflow.example.com:5000/path"),
        ("http://token@10.0.0.5", "http://***@10.0.0.5"),
        ("https://mlflow.example.com/a@b", "https://mlflow.example.com/a@b"),  # an @ in the path is no password
        ("sqlite:////srv/mlflow.db", "sqlite:////srv/mlflow.db"),
        ("/srv/mlruns", "/srv/mlruns"),
    ],
)
def test_a_tracking_uri_is_shown_without_its_password(uri, shown):
    assert tracking.shown_uri(uri) == shown
    params = tracking.spec_params({"name": "x", "mlflow": {"tracking_uri": uri, "experiment": "e"}})
    assert params["mlflow.tracking_uri"] == shown  # sent to the server and written to TensorBoard as such


@needs_mlflow
def test_experiment_new_says_where_a_server_gets_the_runs_data(project):
    """An experiment file from someone else may name any server: when the experiment is made, the user is told
    that the run's parameters and metrics go there (its password hidden); a local store goes unmentioned."""
    server = {"tracking_uri": "https://alice:s3cret@mlflow.example.com/", "experiment": "x"}
    with pytest.warns(SpecWarning, match=r"to the MLflow server at https://\*\*\*@mlflow\.example\.com/") as said:
        resolve(project, server, build=True)
    assert "s3cret" not in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        resolve(project, store(project), build=True)
        resolve(project, server)  # a stored experiment read again (build=False): said once, at 'new'


# ---------------------------------------------------------------------------------------------- a tracked run


@needs_mlflow
def test_a_run_is_mirrored_into_a_local_file_store_in_batches(project, monkeypatch):
    from mlflow.tracking import MlflowClient

    calls = []
    original = MlflowClient.log_batch
    monkeypatch.setattr(
        MlflowClient, "log_batch", lambda self, run, **kw: calls.append(kw) or original(self, run, **kw)
    )
    monkeypatch.setattr(tracking, "SEND_SECONDS", 1e9)  # no batch is due by time: they go when full, and at the end
    folder = new_experiment(project, "tracked", mlflow=store(project), evaluation={"frequency": "500t", "episodes": 2})
    assert run(folder) == "finished"
    episodes = records(folder / "results" / "episodes.jsonl")
    metric_batches = [call["metrics"] for call in calls if call.get("metrics")]
    assert len(metric_batches) == 1 and len(metric_batches[0]) == 2 * len(episodes) + 4 + 2  # one batch, at the end
    mlflow_run = client(project).get_run(run_id(folder))
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == "tracked"
    experiment = client(project).get_experiment_by_name("cartpole-study")
    assert mlflow_run.info.experiment_id == experiment.experiment_id
    params = mlflow_run.data.params
    assert (params["total_timesteps"], params["agent.type"], params["seed"]) == ("1000", "ppo", "3")
    assert params["agent.network.0.size"] == "16" and params["evaluation.frequency"] == "500t"
    returns = history(project, folder, "episode/return")
    assert returns == [(e["timesteps"], e["return"]) for e in episodes]
    assert history(project, folder, "episode/length") == [(e["timesteps"], e["length"]) for e in episodes]
    evaluations = records(folder / "results" / "evaluations.jsonl")
    assert history(project, folder, "evaluation/mean_return") == [
        (e["timesteps"], e["mean_return"]) for e in evaluations
    ]
    ((step, speed),) = history(project, folder, "run/steps_per_second")
    assert step == 1000 and speed > 0
    latest = json.loads((folder / "results" / "checkpoints" / "latest.json").read_text())["folder"]
    artifacts = {Path(a.path).name for a in client(project).list_artifacts(run_id(folder), f"checkpoints/{latest}")}
    assert {"model.json", "model.pt", "runner.json"} <= artifacts


@needs_mlflow
def test_a_resumed_run_logs_on_into_the_same_run_and_sends_nothing_twice(project, monkeypatch):
    # a run that sent everything up to its end, then "crashed" before its last checkpoint: the resumed run replays
    # the steps after the checkpoint before it and must not send their episodes again
    folder = new_experiment(project, "resumed", mlflow=store(project), saver_frequency="400t")
    assert run(folder) == "finished"
    first = run_id(folder)
    sent = len(history(project, folder, "episode/return"))
    checkpoints = folder / "results" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.is_dir()) == ["000000000800", "000000001000"]
    pointer = json.loads((checkpoints / "latest.json").read_text())
    episodes_at_800 = json.loads((checkpoints / "000000000800" / "runner.json").read_text())["state"]["runner"]
    (checkpoints / "latest.json").write_text(
        json.dumps(
            {**pointer, "timesteps": 800, "episodes": episodes_at_800["global_episode"], "folder": "000000000800"}
        )
    )
    assert run(folder, resume=True) == "finished"
    assert run_id(folder) == first
    episodes = records(folder / "results" / "episodes.jsonl")
    assert sent == len(episodes) > episodes_at_800["global_episode"]
    assert history(project, folder, "episode/return") == [(e["timesteps"], e["return"]) for e in episodes]
    assert client(project).get_run(first).info.status == "FINISHED"


@needs_mlflow
def test_a_paused_run_is_scheduled_and_its_resumption_finishes_it(project):
    folder = new_experiment(project, "paused", mlflow=store(project), total_timesteps=400)
    assert run(folder) == "finished"
    tracker = tracking.MlflowRun(store(project), folder / "results", {"name": "paused"}, resume=True)
    assert client(project).get_run(tracker.run_id).info.status == "RUNNING"
    tracker.end("paused", None)
    assert client(project).get_run(tracker.run_id).info.status == "SCHEDULED"
    set_fields(folder, total_timesteps=600)
    assert run(folder, resume=True) == "finished"
    assert client(project).get_run(tracker.run_id).info.status == "FINISHED"


@needs_mlflow
def test_a_store_that_fails_while_running_turns_tracking_off_not_the_run(project, monkeypatch, caplog):
    from mlflow.tracking import MlflowClient

    original = MlflowClient.log_batch

    def failing(self, run, metrics=(), **kw):
        if metrics:
            raise OSError("disk full")
        return original(self, run, **kw)

    monkeypatch.setattr(MlflowClient, "log_batch", failing)
    folder = new_experiment(project, "failing", mlflow=store(project), total_timesteps=300)
    with caplog.at_level(logging.WARNING, "torchforce.worker"):
        assert run(folder) == "finished"
    assert "MLflow: sending metrics failed (disk full); tracking is off for the rest of this run" in caplog.messages
    assert history(project, folder, "episode/return") == []
    assert records(folder / "results" / "episodes.jsonl")  # the results folder has it all


@needs_mlflow
def test_once_tracking_is_off_no_metric_is_buffered(project, monkeypatch, tmp_path):
    # a long run whose store failed must not keep every later episode in memory, nor what another worker thread
    # buffered while the failing batch was being sent
    from mlflow.tracking import MlflowClient

    (tmp_path / "results").mkdir()
    tracker = tracking.MlflowRun(store(project), tmp_path / "results", {"name": "leak"}, resume=False)
    sends = []
    episode = {"episode": 1, "timesteps": 20, "return": 20.0, "length": 20}

    def failing(self, run, metrics=(), **kw):
        sends.append(len(metrics))
        tracker.episode({**episode, "episode": 2, "timesteps": 40})  # another thread, meanwhile
        raise OSError("disk full")

    monkeypatch.setattr(MlflowClient, "log_batch", failing)
    tracker.episode(episode)
    tracker.flush()
    assert not tracker.enabled and tracker._pending == []
    for number in range(3, 1003):
        tracker.episode({**episode, "episode": number, "timesteps": 20 * number})
        tracker.scalars({"run/steps_per_second": 500.0}, 20 * number)
    assert tracker._pending == []
    tracker.end("finished", None)
    assert sends == [2]  # the one batch that failed; nothing after it
