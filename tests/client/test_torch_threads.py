"""The experiment field ``torch_threads``: how many intra-op torch threads run the agent (1 by default), in each run
mode of the worker, as ``experiment show`` says, and what a run resolved before the field gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.client.worker_runs import new_experiment, new_project, run
from torchforce.agents.ppo import PPOAgent
from torchforce.client.cli import main
from torchforce.client.experiment_build import torch_threads_of


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    created = new_project(tmp_path / "project")
    monkeypatch.chdir(created.root)  # tfcli's commands find the project around the current folder
    return created


@pytest.fixture
def threads_of_updates(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch's intra-op thread count in the calling thread at each PPO update, worker agents' included."""
    seen: list[int] = []
    update = PPOAgent._update

    def counted(self: PPOAgent, batch: object) -> object:
        seen.append(torch.get_num_threads())
        return update(self, batch)

    monkeypatch.setattr(PPOAgent, "_update", counted)
    return seen


@pytest.mark.parametrize(
    ("fields", "threads"),
    [
        ({}, 1),
        ({"torch_threads": 2}, 2),
        ({"torch_threads": 2, "run_mode": "multi-threaded", "num_workers": 2}, 2),  # in each worker thread
    ],
    ids=["default", "single", "multi-threaded"],
)
def test_the_agent_learns_on_the_experiment_s_torch_threads(project, threads_of_updates, fields, threads):
    before = torch.get_num_threads()
    folder = new_experiment(project, "threads", **fields)
    assert json.loads((folder / "experiment.json").read_text())["torch_threads"] == threads
    assert run(folder) == "finished"
    assert threads_of_updates and set(threads_of_updates) == {threads}
    assert torch.get_num_threads() == before  # the runner sets back the count it found


def test_a_run_resolved_before_the_field_learns_on_one_thread(project, threads_of_updates):
    folder = new_experiment(project, "older", torch_threads=2)
    spec = json.loads((folder / "experiment.json").read_text())
    del spec["torch_threads"]
    (folder / "experiment.json").write_text(json.dumps(spec))
    assert torch_threads_of(spec) == 1
    assert run(folder) == "finished"
    assert set(threads_of_updates) == {1}


def test_show_names_the_threads_where_there_are_several_and_the_workers(project, capsys):
    new_experiment(project, "one")
    new_experiment(project, "four", torch_threads=4)
    new_experiment(project, "threads", run_mode="multi-threaded", num_workers=3)
    new_experiment(project, "one-worker", run_mode="multi-threaded", num_workers=1, torch_threads=2)
    new_experiment(project, "dist", run_mode="distributed", num_workers=2)
    new_experiment(project, "servers", run_mode="distributed", num_workers=1, num_parameter_servers=2)
    outputs = {}
    for name in ("one", "four", "threads", "one-worker", "dist", "servers"):
        assert main(["experiment", "show", "-e", name]) == 0
        outputs[name] = capsys.readouterr().out
    assert "Run mode     single, seed 3\n" in outputs["one"]
    assert "Run mode     single, 4 torch threads, seed 3\n" in outputs["four"]
    assert "Run mode     multi-threaded, 3 workers, seed 3\n" in outputs["threads"]
    assert "Run mode     multi-threaded, 1 worker, 2 torch threads, seed 3\n" in outputs["one-worker"]
    assert "Run mode     distributed, 2 workers, 1 parameter server, seed 3\n" in outputs["dist"]
    assert "Run mode     distributed, 1 worker, 2 parameter servers, seed 3\n" in outputs["servers"]


def test_the_flag_writes_the_field(project, capsys):
    code = main(["experiment", "new", "-n", "flagged", "-A", "small_ppo", "-E", "cartpole", "--torch-threads", "3"])
    assert code == 0, capsys.readouterr().err
    spec = json.loads((project.root / "experiments" / "flagged" / "experiment.json").read_text())
    assert spec["torch_threads"] == 3
