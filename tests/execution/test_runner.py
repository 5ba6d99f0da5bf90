"""The Runner of seed 002: limits, truncation at exactly max_episode_timesteps, callbacks, history, vectorized runs."""

import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.environments import VectorEnvironment, make
from torchforce.execution import Runner

MLP = [{"type": "dense", "size": 8}]


def random_agent(env):
    return create_agent({"type": "random", "seed": 0}, states=env.states, actions=env.actions)


class Recorder:
    """An agent wrapper that records what the runner tells it."""

    def __init__(self, agent):
        self.agent = agent
        self.observed = []

    def __getattr__(self, name):
        return getattr(self.agent, name)

    def observe(self, terminal, reward, next_states=None):
        self.observed.append((np.asarray(terminal).copy(), next_states is not None))
        return self.agent.observe(terminal, reward, next_states)


def test_episodes_are_cut_at_exactly_max_episode_timesteps_as_truncations():
    env = make("gym", gym_id="CartPole-v1")
    agent = Recorder(create_agent({"type": "constant", "action_values": 0}, states=env.states, actions=env.actions))
    runner = Runner(agent, env)
    runner.run(num_episodes=3, max_episode_timesteps=5)
    assert runner.episode_timesteps == [5, 5, 5] or all(t <= 5 for t in runner.episode_timesteps)
    # CartPole with a constant action falls over in about 9 steps, so a cut at 5 is always a truncation
    assert runner.episode_timesteps == [5, 5, 5]
    ends = [int(t) for t, _ in agent.observed if int(t)]
    assert ends == [2, 2, 2]
    assert all(has_next for t, has_next in agent.observed if int(t) == 2)


def test_limits_and_history():
    env = make("minimal")
    runner = Runner(
        random_agent(env), env, history={"episode_rewards": [1.0], "episode_timesteps": [10], "episode_times": [0.1]}
    )
    runner.run(num_episodes=4)
    assert len(runner.episode_rewards) == 5 and runner.episode == 5
    runner.run(num_timesteps=25)
    assert runner.timestep == 10 + 40 + 25


def test_falsy_callback_return_stops_and_one_argument_form_works():
    env = make("minimal")
    runner = Runner(random_agent(env), env)
    seen = []
    runner.run(num_episodes=10, episode_finished=lambda r: seen.append(r.episode) or len(seen) < 3)
    assert seen == [1, 2, 3]
    calls = []
    runner.run(num_episodes=2, episode_finished=lambda r, worker: calls.append(worker) or True)
    assert calls == [0, 0]


def test_deprecated_keywords_still_work():
    env = make("minimal")
    runner = Runner(random_agent(env), env)
    with pytest.warns(DeprecationWarning):
        runner.run(episodes=2)
    assert runner.episode == 2


def test_vectorized_runner_makes_one_act_per_step_and_counts_every_row():
    envs = VectorEnvironment([make("minimal") for _ in range(4)])
    agent = create_agent({"type": "ppo", "network": MLP, "update_mode": {"unit": "timesteps", "batch_size": 16},
                          "memory": {"type": "latest", "capacity": 64}, "seed": 0},
                         states=envs.states, actions=envs.actions)  # fmt: skip
    runner = Runner(agent, envs)
    runner.run(num_timesteps=80)
    assert runner.timestep == 80 and agent.timestep == 80
    assert runner.episode == 8  # 4 rows x 20 steps / episodes of 10
    assert agent.updates == 5


def test_vectorized_runner_truncates_rows_at_the_step_limit():
    envs = VectorEnvironment([make("gym", gym_id="CartPole-v1") for _ in range(3)])
    envs.seed(0)
    agent = Recorder(random_agent(envs))
    runner = Runner(agent, envs)
    runner.run(num_episodes=6, max_episode_timesteps=4)
    assert all(t <= 4 for t in runner.episode_timesteps)
    truncated = sum(int((t == 2).sum()) for t, _ in agent.observed)
    assert truncated == sum(1 for t in runner.episode_timesteps if t == 4) or truncated >= 1


def test_testing_mode_does_not_learn():
    env = make("minimal")
    agent = create_agent({"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes", "batch_size": 1}},
                         states=env.states, actions=env.actions)  # fmt: skip
    Runner(agent, env).run(num_episodes=3, testing=True)
    assert agent.updates == 0 and agent.timestep == 0
