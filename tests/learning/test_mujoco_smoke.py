"""Smoke runs of the shipped MuJoCo experiments: each one's agent config on its real environment for a few hundred
steps, up to its first updates (DDPG's and NAF's first update is moved from 10,000 steps to 300, nothing else
changes). Whether they learn is the benchmarks' question (bench/); here: the agent updates, the normalization the
PPO configs carry works on real states and rewards, actions stay in bounds, and a checkpoint taken mid-run
continues exactly."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.configs import names, shipped
from torchforce.core.preprocessors import RunningReturnScale
from torchforce.environments import make

MUJOCO_EXPERIMENTS = {"halfcheetah_ppo", "hopper_ppo", "halfcheetah_ddpg", "halfcheetah_naf"}
STEPS = 1020  # past PPO's first update (at 512 steps), the checkpoint's replay past its second (at 1024)
FIRST_UPDATE = 900  # DDPG's and NAF's, for about a hundred updates before the checkpoint and some after it
REPLAY = 6  # steps played from the checkpoint on, by the agent and by a fresh agent restored from it


def load(kind: str, name: str) -> dict:
    return json.loads(shipped(kind, name).read_text())


def is_mujoco(environment: str | dict) -> bool:
    """Whether an experiment's environment (a config's name, or inline) is one of Gymnasium's MuJoCo tasks."""
    spec = environment if isinstance(environment, dict) else load("environments", environment)
    registered = gym.envs.registry.get(spec.get("gym_id", ""))
    return registered is not None and "mujoco" in str(registered.entry_point)


def test_the_mujoco_experiments_are_shipped():
    shipped_ones = {name for name in names("experiments") if is_mujoco(load("experiments", name)["environment"])}
    assert shipped_ones == MUJOCO_EXPERIMENTS


def agent_spec(experiment: dict) -> dict:
    spec = load("agents", experiment["agent"])
    if spec["type"] in ("ddpg", "naf"):
        spec["update_mode"] = {**spec["update_mode"], "first_update": FIRST_UPDATE}
    return {**spec, "seed": 0}


class Trail:
    """What a run saw, step by step: the acted state, the action, the outcome, whether the step started an
    episode."""

    def __init__(self) -> None:
        self.states: list = []
        self.actions: list = []
        self.outcomes: list = []  # (terminal, reward, next_states)
        self.starts: list[bool] = []

    @property
    def rewards(self) -> np.ndarray:
        return np.array([reward for _, reward, _ in self.outcomes])

    def truncations(self) -> int:
        return sum(terminal == 2 for terminal, _, _ in self.outcomes)


def play(agent, environment, state, steps: int, trail: Trail, fresh: bool = True):
    """``steps`` act/observe steps from ``state``, into ``trail``; returns the next state to act on and whether it
    starts an episode."""
    for _ in range(steps):
        action = agent.act(state)
        assert action.shape == (len(action),) and np.all(np.abs(action) <= 1.0), action  # in [-1, 1]
        next_state, terminal, reward = environment.execute(action)
        outcome = (terminal, reward, next_state if terminal == 2 else None)
        agent.observe(terminal=outcome[0], reward=outcome[1], next_states=outcome[2])
        trail.states.append(state)
        trail.actions.append(action)
        trail.outcomes.append(outcome)
        trail.starts.append(fresh)
        fresh = bool(terminal)
        state = environment.reset() if terminal else next_state
    return state, fresh


def expected_scaled(trail: Trail, discount: float) -> np.ndarray:
    """The rewards as ``running_return_scale`` sees them one step at a time, its episodes starting as the trail's."""
    scale = RunningReturnScale(discount=discount)
    scaled = []
    for reward, start in zip(trail.rewards, trail.starts, strict=True):
        if start:
            scale.start_episodes([0])
        scaled.append(scale.process(np.array([reward]))[0])
    return np.array(scaled)


@pytest.mark.parametrize("name", sorted(MUJOCO_EXPERIMENTS))
def test_a_mujoco_experiment_runs_normalizes_and_resumes_exactly(name, tmp_path):
    experiment = load("experiments", name)
    spec = agent_spec(experiment)
    environment = make(shipped("environments", experiment["environment"]))
    environment.seed(0)
    agent = create_agent(spec, states=environment.states, actions=environment.actions)
    trail = Trail()
    state, fresh = play(agent, environment, environment.reset(), STEPS, trail)
    assert agent.updates >= 1

    if "states_preprocessing" in spec:  # the PPO configs: VecNormalize's normalization of states and rewards
        statistics = agent.preprocessing["state"].state_dict()["0"]  # running_standardize's, over the whole run
        # every acted state; a truncation's final state (HalfCheetah's at step 1000) is standardized for the
        # bootstrap, not counted
        assert statistics["count"] == STEPS
        np.testing.assert_allclose(statistics["mean"], np.mean(trail.states, axis=0), atol=0.05)
        assert np.all(np.abs(statistics["mean"]) > 0.0) and np.all(statistics["m2"] > 0.0)
        discount = spec["reward_preprocessing"]["discount"]
        assert discount == spec["discount"]
        stored = agent.memory.retrieve_timesteps(len(agent.memory))["reward"]  # the updates' rows, in order
        assert len(stored) == 512 * agent.updates
        np.testing.assert_allclose(stored, expected_scaled(trail, discount)[: len(stored)], rtol=1e-5)
        assert np.all(np.abs(stored) <= 10.0) and not np.allclose(stored, trail.rewards[: len(stored)])
    else:  # DDPG and NAF learn from raw states and rewards, as the zoo's DDPG and TD3 do
        assert not agent.preprocessing and agent.reward_preprocessing is None

    # a checkpoint mid-run: a fresh agent restored from it acts (sampling, exploring, updating) as the agent did
    checkpoint = agent.save_model(tmp_path)
    updates = agent.updates
    replay = Trail()
    play(agent, environment, state, REPLAY, replay, fresh)
    assert agent.updates > updates
    restored = create_agent(spec, states=environment.states, actions=environment.actions)
    restored.restore_model(file=checkpoint)
    steps = zip(replay.states, replay.actions, replay.outcomes, strict=True)
    for acted, action, (terminal, reward, next_states) in steps:
        np.testing.assert_array_equal(restored.act(acted), action)
        restored.observe(terminal=terminal, reward=reward, next_states=next_states)
    assert (restored.timestep, restored.updates) == (agent.timestep, agent.updates)
    greedy = {"deterministic": True, "independent": True}
    np.testing.assert_array_equal(restored.act(state, **greedy), agent.act(state, **greedy))
    environment.close()
