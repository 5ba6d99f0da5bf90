"""train(): the shared training loop, on tiny environments and budgets."""

import json
from itertools import pairwise

import numpy as np
import pytest

from tests.tiny_environments import OneNumber
from torchforce.execution.training import EPISODE_LOG_KEYS, TrainingResult, train
from torchforce.spec import SpecError

MINIMAL = {"type": "minimal", "episode_length": 5}


def test_train_runs_the_budget_logs_every_episode_and_evaluates_on_schedule(tmp_path):
    log = tmp_path / "episodes.jsonl"
    agent, result = train(
        {"type": "random"},
        MINIMAL,
        num_environments=2,
        seed=3,
        num_timesteps=100,
        eval_every=20,
        eval_episodes=2,
        episode_log=log,
    )
    assert isinstance(result, TrainingResult) and agent.timestep == 100
    # 2 rows of 50 steps, episodes of 5: 20 episodes, both rows ending together every 10 timesteps
    assert (result.timesteps, result.episodes) == (100, 20)
    assert [e["timesteps"] for e in result.evaluations] == [20, 40, 60, 80, 100]
    assert all(0.0 <= e["mean_return"] <= 5.0 and e["train_seconds"] >= 0.0 for e in result.evaluations)
    assert not result.solved and result.threshold is None and result.timesteps_to_threshold is None
    assert result.train_seconds > 0.0 and result.evaluation_seconds > 0.0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 20 and all(tuple(record) == EPISODE_LOG_KEYS for record in records)
    assert [r["episode"] for r in records] == list(range(1, 21))
    assert [r["worker"] for r in records] == [0, 1] * 10
    assert [r["timesteps"] for r in records] == [10 * (i // 2 + 1) for i in range(20)]
    assert all(r["length"] == 5 and 0.0 <= r["return"] <= 5.0 for r in records)
    wall = [r["wall_time"] for r in records]
    assert wall == sorted(wall)
    summary = result.to_dict()
    assert summary["solved"] is False and summary["episodes"] == 20 and len(summary["evaluations"]) == 5
    json.dumps(summary)


def test_reaching_the_threshold_stops_early():
    _, result = train(
        {"type": "random"},
        MINIMAL,
        num_environments=2,
        num_timesteps=1_000,
        threshold=0.0,
        eval_every=20,
        eval_episodes=1,
    )
    # the first evaluation (at the first episode end at or past 20 timesteps) reaches 0.0
    assert result.solved and result.timesteps_to_threshold == 20 == result.timesteps
    assert result.episodes == 3  # stopped at row 0's episode: row 1's, ending in the same step, is not recorded
    assert len(result.evaluations) == 1 and result.seconds_to_threshold == result.evaluations[0]["train_seconds"]
    _, result = train(
        {"type": "random"}, MINIMAL, num_environments=2, num_timesteps=60, threshold=6.0, eval_every=20, eval_episodes=1
    )
    assert not result.solved and result.timesteps == 60 and len(result.evaluations) == 3


def test_train_learns_with_a_learning_agent_and_a_gym_id():
    agent, result = train(
        {
            "type": "ppo",
            "update_mode": {"unit": "timesteps", "batch_size": 32},
            "memory": {"type": "latest", "capacity": 64},
            "optimization_steps": 2,
        },
        "CartPole-v1",
        num_environments=4,
        num_timesteps=64,
        eval_every=1_000,
        eval_episodes=1,
        agent_kwargs={"network": [{"type": "dense", "size": 8}]},
    )
    assert agent.updates >= 1 and result.timesteps == 64 and result.evaluations == []


class Uneven(OneNumber):
    """Episodes of 30 steps, then of 1 step, then 30 again...: episode ends come in bursts."""

    def __init__(self) -> None:
        self.episode, self.t = 0, 0

    def reset(self):
        self.episode, self.t = self.episode + 1, 0
        return np.zeros(1, dtype=np.float32)

    def execute(self, actions):
        self.t += 1
        length = 30 if self.episode % 5 == 1 else 1
        return np.zeros(1, dtype=np.float32), int(self.t >= length), 0.0


def test_evaluations_keep_to_the_schedule_after_a_long_episode():
    _, result = train({"type": "random"}, Uneven, num_environments=1, num_timesteps=100, eval_every=10, eval_episodes=1)
    timesteps = [e["timesteps"] for e in result.evaluations]
    # episodes end at 30, 31, 32, 33, 34, 64, 65, ...: one evaluation at 30, the next at the first end at or past 40,
    # not one at each of the short episodes right after the long one
    assert timesteps == [30, 64, 98, 100]
    assert all(a // 10 < b // 10 for a, b in pairwise(timesteps))  # at most one per eval_every interval


def test_train_checks_its_arguments(tmp_path):
    with pytest.raises(SpecError, match="eval_every"):
        train({"type": "random"}, MINIMAL, num_environments=1, num_timesteps=10, eval_every=0)
    with pytest.raises(SpecError, match="agent"):
        train({"type": "ppo0"}, MINIMAL, num_environments=1, num_timesteps=10, episode_log=tmp_path / "log.jsonl")
    assert not (tmp_path / "log.jsonl").exists()
