"""Tiny experiments run by the worker in this process (``ExperimentRun``), for the tests of what it writes under
``results/``: a small PPO on CartPole, short episodes, a run of a second or two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torchforce.client import Experiment, Project
from torchforce.client.experiment_run import ExperimentRun
from torchforce.client.signals import Signals

SMALL_PPO = {
    "type": "ppo",
    "network": [{"type": "dense", "size": 16, "activation": "tanh"}],
    "update_mode": {"unit": "timesteps", "batch_size": 128, "frequency": 128},
    "memory": {"type": "latest", "capacity": 512},
    "step_optimizer": {"type": "adam", "learning_rate": 0.003},
    "epochs": 2,
    "minibatch_size": 64,
}
STANDARDIZED_PPO = {  # per-episode statistics, and frames stacked: state of each episode in the preprocessing
    **SMALL_PPO,
    "states_preprocessing": [{"type": "running_standardize"}, {"type": "sequence", "length": 3}],
}
SMALL_DQN = {
    "type": "dqn",
    "network": [{"type": "dense", "size": 16, "activation": "relu"}],
    "memory": {"type": "replay", "capacity": 2000},
    "update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 4, "first_update": 100},
    "optimizer": {"type": "adam", "learning_rate": 0.001},
    "target_sync_frequency": 50,
    "actions_exploration": {"type": "epsilon_anneal", "initial_epsilon": 1.0, "final_epsilon": 0.1, "timesteps": 500},
}
FIELDS: dict[str, Any] = {
    "agent": "small_ppo",
    "environment": "cartpole",
    "total_timesteps": 1000,
    "max_timesteps_per_episode": 60,
    "seed": 3,
}


def new_project(root: Path) -> Project:
    """A project in ``root`` (the current folder) with the agent configs ``small_ppo``, ``standardized_ppo`` (its
    states through running_standardize per episode, then 3 frames stacked) and ``small_dqn``."""
    root.mkdir(parents=True, exist_ok=True)
    project, _ = Project.init(root)
    configs = {"small_ppo": SMALL_PPO, "standardized_ppo": STANDARDIZED_PPO, "small_dqn": SMALL_DQN}
    for name, config in configs.items():
        (root / "configs" / "agents" / f"{name}.json").write_text(json.dumps(config))
    return project


def new_experiment(project: Project, name: str, **fields: Any) -> Path:
    """Create experiment ``name`` (``FIELDS`` with ``fields`` over them); returns its folder."""
    return Experiment(project, name=name, **{**FIELDS, **fields}).generate_locally()


def run(folder: Path, *, resume: bool = False) -> str:
    """Run the experiment in ``folder`` to its end, as the worker process would."""
    Signals.request = None
    return ExperimentRun(folder, resume).run()


def pause_at(monkeypatch: Any, timesteps: int) -> list[int]:
    """The runs after this call pause once, at the first step that reaches ``timesteps`` (as a pause signal arriving
    during that step would): the list returned gets that step's timestep."""
    step_finished = ExperimentRun.step_finished
    paused: list[int] = []

    def pausing(self: ExperimentRun, runner: Any) -> bool:
        if runner.global_timestep >= timesteps and not paused:
            paused.append(runner.global_timestep)
            Signals.request = "pause"
        return step_finished(self, runner)

    monkeypatch.setattr(ExperimentRun, "step_finished", pausing)
    return paused


def set_fields(folder: Path, **fields: Any) -> None:
    """Change fields of a stored experiment.json (as a person editing it would)."""
    spec = json.loads((folder / "experiment.json").read_text())
    (folder / "experiment.json").write_text(json.dumps({**spec, **fields}))


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_wall_time(rows: list[dict]) -> list[dict]:
    """Records without their wall time, the one field two runs of the same experiment never share."""
    return [{key: value for key, value in row.items() if key != "wall_time"} for row in rows]
