"""evaluate(): deterministic, independent episodes that leave the agent exactly as it was."""

import json
import math

import numpy as np
import pytest
import torch

from tests.tiny_environments import OneNumber
from torchforce.agents import create_agent
from torchforce.environments import VectorEnvironment, make
from torchforce.execution import Runner
from torchforce.execution.evaluation import evaluate, mean_return
from torchforce.spec import SpecError

MLP = [{"type": "dense", "size": 8}]
AGENTS = {
    "dqn": {
        "type": "dqn",
        "network": MLP,
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
        "memory": {"type": "replay", "capacity": 200},
        "seed": 0,
    },
    "ppo": {
        "type": "ppo",
        "network": MLP,
        "update_mode": {"unit": "timesteps", "batch_size": 12},
        "memory": {"type": "latest", "capacity": 64},
        "optimization_steps": 3,
        "seed": 0,
    },
}


class Steps(OneNumber):
    """Reward 1 per step; a true terminal after ``length`` steps."""

    def __init__(self, length: int = 100) -> None:
        self.length, self.t = length, 0

    def reset(self):
        self.t = 0
        return np.zeros(1, dtype=np.float32)

    def execute(self, actions):
        self.t += 1
        return np.full(1, self.t, dtype=np.float32), int(self.t >= self.length), 1.0


def snapshot(agent):
    """Everything evaluation must not touch: counters, memory contents, parameters."""
    memory = {name: data.copy() for name, data in agent.memory.state_dict()["data"].items()}
    parameters = {name: value.detach().clone() for name, value in agent.get_parameters().items()}
    return (agent.timestep, agent.episode, agent.updates, len(agent.memory)), memory, parameters


def assert_same(a, b):
    assert a[0] == b[0]
    assert a[1].keys() == b[1].keys()
    for key in a[1]:
        np.testing.assert_array_equal(a[1][key], b[1][key], err_msg=key)
    for name in a[2]:
        torch.testing.assert_close(a[2][name], b[2][name], rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_evaluation_leaves_counters_memory_and_parameters_alone(name):
    env = make("minimal", seed=0)
    agent = create_agent(AGENTS[name], states=env.states, actions=env.actions)
    Runner(agent, env).run(num_timesteps=25)  # stops inside an episode, with experience in memory
    before = snapshot(agent)
    assert before[0][3] > 0
    returns = evaluate(agent, make("minimal", seed=1), episodes=3)
    assert len(returns) == 3 and all(0.0 <= value <= 10.0 for value in returns)
    assert_same(snapshot(agent), before)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_training_with_evaluations_in_between_is_the_same_as_without(name):
    """Independent acts in the middle of vectorized episodes do not change what the agent stores or learns."""
    results = []
    for with_evaluation in (False, True):
        envs = VectorEnvironment([make("minimal", seed=i) for i in range(2)])
        agent = create_agent(AGENTS[name], states=envs.states, actions=envs.actions)
        evaluation_env = make("minimal", seed=100)

        def step_finished(runner, agent=agent, evaluate_now=with_evaluation, env=evaluation_env):
            if evaluate_now and runner.timestep % 6 == 0:
                evaluate(agent, env, episodes=1)
            return True

        Runner(agent, envs).run(num_timesteps=60, step_finished=step_finished)
        assert agent.updates > 0
        results.append(snapshot(agent))
    assert_same(results[0], results[1])


def test_evaluation_acts_deterministically_and_independently():
    env = Steps(length=100)
    calls = []
    agent = create_agent({"type": "random", "seed": 0}, states=env.states, actions=env.actions)
    act = agent.act
    agent.act = lambda states, deterministic=False, independent=False: (
        calls.append((deterministic, independent)) or act(states, deterministic=deterministic, independent=independent)
    )
    assert evaluate(agent, env, episodes=2, max_episode_timesteps=5) == [5.0, 5.0]
    assert calls == [(True, True)] * 10
    calls.clear()
    assert evaluate(agent, Steps(length=3), episodes=1, deterministic=False) == [3.0]  # ends at the terminal
    assert calls == [(False, True)] * 3
    assert agent.timestep == 0 and agent.episode == 0


def test_evaluation_arguments_are_checked_and_mean_return():
    env = Steps()
    agent = create_agent({"type": "random"}, states=env.states, actions=env.actions)
    with pytest.raises(SpecError, match="episodes"):
        evaluate(agent, env, episodes=0)
    with pytest.raises(SpecError, match="max_episode_timesteps"):
        evaluate(agent, env, episodes=1, max_episode_timesteps=0)
    assert mean_return([1.0, 2.0]) == 1.5 and math.isnan(mean_return([]))


def test_an_atari_evaluation_scores_whole_games_not_lives(tmp_path):
    """Episodic life ends the agent's episode at each lost life; evaluation plays the game on, life after life (each
    an episode of the agent, as in training), and its returns are the games' scores, as the monitor records them
    below the life wrapper (SB3 scores a Monitor's games the same way)."""
    from torchforce.execution.evaluation import evaluate_episodes

    environment = make({"type": "atari", "game": "Breakout", "monitor": str(tmp_path)}, seed=1)
    agent = create_agent({"type": "random", "seed": 0}, states=environment.states, actions=environment.actions)
    starts = []
    start = agent.start_independent_episode
    agent.start_independent_episode = lambda *args, **kwargs: (starts.append(1), start(*args, **kwargs))[1]
    played = evaluate_episodes(agent, environment, episodes=2, deterministic=False)
    games = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [game["reward"] for game in games] == played.returns and len(games) == 2
    assert len(starts) == 2 * 5  # Breakout's five lives a game, each a new episode of the agent
    assert all(length > 0 for length in played.lengths)
    environment.close()
