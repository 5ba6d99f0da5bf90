"""A run paused in the middle of its episodes goes on with them where the environments pickle whole and where they
do not: MuJoCo's and ALE's simulators come back from the checkpoint (``torchforce.environments.snapshots``), so a
paused and resumed run logs the episodes of an uninterrupted one, step for step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.worker_runs import (
    SMALL_PPO,
    new_experiment,
    new_project,
    pause_at,
    records,
    run,
    without_wall_time,
)
from torchforce.client import Project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    project = new_project(tmp_path / "project")
    flat = {**SMALL_PPO, "network": [{"type": "flatten"}, *SMALL_PPO["network"]]}  # frames, cheaply
    (project.root / "configs" / "agents" / "flat_ppo.json").write_text(json.dumps(flat))
    return project


@pytest.mark.parametrize(("environment", "agent"), [("halfcheetah", "small_ppo"), ("breakout", "flat_ppo")])
def test_a_run_paused_mid_episode_on_a_simulator_resumes_as_an_uninterrupted_one(
    project, monkeypatch, environment, agent
):
    fields = {
        "environment": environment,
        "agent": agent,
        "num_environments": 2,
        "total_timesteps": 600,
        "max_timesteps_per_episode": 70,  # both rows are mid-episode at the pause (step 150: 2 x 75)
    }
    whole = new_experiment(project, "whole", **fields)
    assert run(whole) == "finished"
    paused = pause_at(monkeypatch, 150)
    halves = new_experiment(project, "halves", **fields)
    assert run(halves) == "paused" and paused == [150]
    assert run(halves, resume=True) == "finished"
    expected = without_wall_time(records(whole / "results" / "episodes.jsonl"))
    assert len(expected) >= 6
    assert without_wall_time(records(halves / "results" / "episodes.jsonl")) == expected
