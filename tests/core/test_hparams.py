"""TensorBoard: the Summarizer's hyperparameters (the HParams plugin's experiment and session start) and the run's own
scalars, read back from the event files it wrote; and what a worker's run writes there (steps/s, the recent mean
return that measures it, its resolved spec as hyperparameters)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from tests.client.worker_runs import new_experiment, new_project, records, run
from torchforce.core.summaries import Summarizer


def read_events(directory: Path) -> EventAccumulator:
    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    events.Reload()
    return events


def hyperparameters(events: EventAccumulator) -> tuple[dict[str, object], list[str]]:
    """The session's hyperparameters (name -> value) and the experiment's metric tags."""
    content = events.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    values = {
        name: getattr(value, value.WhichOneof("kind")) for name, value in start.session_start_info.hparams.items()
    }
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    return values, [metric.name.tag for metric in experiment.experiment.metric_infos]


def test_hparams_and_the_runs_scalars_are_in_the_event_files(tmp_path):
    summarizer = Summarizer({"directory": str(tmp_path), "labels": ["entropy"]})
    summarizer.hparams(
        {"agent.learning_rate": 0.003, "agent.epochs": 2, "agent.type": "ppo", "deterministic": True, "seed": None},
        ["run/mean_return_100"],
    )
    summarizer.scalars({"run/mean_return_100": 21.5, "run/steps_per_second": 800.0}, 1000)
    summarizer.scalars({"evaluation/mean_return": 30.0, "update/policy_loss": 0.5}, 1000)
    summarizer.close()
    events = read_events(tmp_path)
    values, metrics = hyperparameters(events)
    assert values == {"agent.learning_rate": 0.003, "agent.epochs": 2.0, "agent.type": "ppo", "deterministic": "true"}
    assert metrics == ["run/mean_return_100"]
    # the run's own scalars are written whatever the labels select; the losses are not, with only "entropy" asked
    assert set(events.Tags()["scalars"]) == {"run/mean_return_100", "run/steps_per_second", "evaluation/mean_return"}
    assert [(e.step, e.value) for e in events.Scalars("run/mean_return_100")] == [(1000, 21.5)]


def test_a_summarizer_without_a_directory_writes_no_hparams(tmp_path):
    summarizer = Summarizer({})
    summarizer.hparams({"seed": 1}, ["run/mean_return_100"])  # nothing to write to: nothing happens
    assert not summarizer.enabled


def test_a_worker_run_writes_steps_per_second_its_recent_return_and_its_spec(tmp_path, monkeypatch, caplog):
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    project = new_project(tmp_path / "project")
    folder = new_experiment(project, "summarized", evaluation={"frequency": "500t", "episodes": 2})
    with caplog.at_level(logging.INFO, "torchforce.worker"):
        assert run(folder) == "finished"
    events = read_events(folder / "results" / "summaries")
    values, metrics = hyperparameters(events)
    assert metrics == ["run/mean_return_100", "evaluation/mean_return"]
    assert values["total_timesteps"] == 1000.0 and values["seed"] == 3.0 and values["agent.type"] == "ppo"
    assert values["agent.network.0.size"] == 16.0 and values["evaluation.frequency"] == "500t"
    assert values["environment.gym_id"] == "CartPole-v1" and values["debug_logging"] == "false"
    assert "sources.agent" not in values and "created_at" not in values
    speeds = events.Scalars("run/steps_per_second")  # one per progress line, the last at the end
    lines = [m for m in caplog.messages if m.startswith("episode ") and "steps/s" in m]
    assert len(speeds) == len(lines) >= 1
    speed, line = speeds[-1], lines[-1]
    assert speed.step == 1000 and f"{speed.value:.0f} steps/s" in line and speed.value > 0
    returns = [e["return"] for e in records(folder / "results" / "episodes.jsonl")][-100:]
    recent = events.Scalars("run/mean_return_100")[-1]
    assert (recent.step, recent.value) == (1000, pytest.approx(sum(returns) / len(returns)))
    assert re.search(rf"mean return \(last {len(returns)}\) {recent.value:.2f}$", line)
