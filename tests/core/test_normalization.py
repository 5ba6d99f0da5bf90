"""Normalization as rl-baselines3-zoo's ``normalize: true`` (SB3's VecNormalize) does it: ``running_return_scale``
for rewards, ``running_standardize`` without reset plus ``clip`` for states, and statistics frozen while the agent
acts independently (evaluation)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.core.preprocessors import (
    PRIOR_COUNT,
    Clip,
    RunningReturnScale,
    RunningStandardize,
    build_preprocessing,
    build_reward_preprocessing,
)
from torchforce.environments import make
from torchforce.spec import SpecError, StateSpec


def prior_statistics(returns: list[float]) -> tuple[float, float]:
    """Mean and population variance of ``returns`` together with SB3's pseudo-sample (weight 1e-4, mean 0,
    variance 1), in two passes: an independent check of the step's incremental update."""
    values = np.asarray(returns, dtype=np.float64)
    weight = PRIOR_COUNT + len(values)
    mean = values.sum() / weight
    second_moment = (PRIOR_COUNT * 1.0 + (values**2).sum()) / weight
    return mean, second_moment - mean**2


def test_running_return_scale_by_hand_with_two_rows_and_an_episode_start():
    scale = RunningReturnScale(discount=0.5, clip=10.0, epsilon=0.0)
    first = scale.process(np.array([1.0, 3.0]))  # returns 1, 3
    _, variance = prior_statistics([1.0, 3.0])
    np.testing.assert_allclose(first, [1.0 / math.sqrt(variance), 3.0 / math.sqrt(variance)], rtol=1e-6)
    assert first.dtype == np.float32 and variance == pytest.approx(1.0, abs=1e-3)
    scale.process(np.array([2.0, -1.0]))  # returns 0.5 * 1 + 2 = 2.5 and 0.5 * 3 - 1 = 0.5
    scale.start_episodes([1])  # row 1 starts over
    out = scale.process(np.array([4.0, 2.0]))  # returns 0.5 * 2.5 + 4 = 5.25, and 2 (fresh)
    np.testing.assert_array_equal(scale.state_dict()["returns"], [5.25, 2.0])
    _, variance = prior_statistics([1.0, 3.0, 2.5, 0.5, 5.25, 2.0])
    np.testing.assert_allclose(out, [4.0 / math.sqrt(variance), 2.0 / math.sqrt(variance)], rtol=1e-6)
    assert scale.state_dict()["count"] == pytest.approx(6 + 1e-4)


def test_one_environments_steps_fold_exactly_as_a_batch_of_one_row_would():
    """One row per step (a single environment) takes a shortcut past the reductions; its statistics and outputs
    must be bit for bit those of the general fold, written out here for a batch of one."""
    rng = np.random.default_rng(3)
    states, rewards = rng.normal(2.0, 3.0, size=(50, 4)), rng.normal(0.5, 2.0, size=50)
    running, scale = RunningStandardize(reset_after_batch=False), RunningReturnScale(discount=0.9, clip=5.0)
    count, mean, m2 = 0, np.zeros(4), np.zeros(4)
    prior, return_mean, variance, discounted = PRIOR_COUNT, 0.0, 1.0, 0.0
    for state, reward in zip(states, rewards, strict=True):
        batch = state[None]
        batch_mean = batch.mean(axis=0)
        batch_m2 = ((batch - batch_mean) ** 2).sum(axis=0)
        if count == 0:
            count, mean, m2 = 1, batch_mean, batch_m2
        else:
            delta = batch_mean - mean
            mean, m2, count = (
                mean + delta * (1 / (count + 1)),
                m2 + batch_m2 + delta**2 * (count / (count + 1)),
                count + 1,
            )
        expected = batch if count <= 1 else (batch - mean) / np.maximum(np.sqrt(m2 / (count - 1)), 1e-6)
        np.testing.assert_array_equal(running.process(batch), expected.astype(np.float32))
        returns = np.array([discounted * 0.9 + reward])
        discounted, total = float(returns[0]), prior + 1
        delta = returns.mean() - return_mean
        squares = variance * prior + returns.var() * 1 + delta**2 * prior * 1 / total
        return_mean, variance, prior = return_mean + delta * 1 / total, squares / total, total
        scaled = np.clip(np.array([reward]) / math.sqrt(variance + 1e-8), -5.0, 5.0).astype(np.float32)
        np.testing.assert_array_equal(scale.process(np.array([reward])), scaled)
    assert running.state_dict()["count"] == count
    np.testing.assert_array_equal(running.state_dict()["mean"], mean)
    np.testing.assert_array_equal(running.state_dict()["m2"], m2)
    assert (scale.state_dict()["mean"], scale.state_dict()["variance"]) == (return_mean, variance)


def test_running_return_scale_clips_and_keeps_signs():
    # one first return: a variance of about 2e-4 (the pseudo-sample's weight), so the reward comes out clipped
    np.testing.assert_array_equal(RunningReturnScale().process(np.array([1.0])), [10.0])
    scale = RunningReturnScale(discount=0.9, clip=2.0)
    for reward in ([1.0, -1.0], [0.5, -0.5], [1.0, 1.0]):
        scale.process(np.array(reward))
    out = scale.process(np.array([1000.0, -1000.0, 0.0]))  # a third row joins with a return of 0
    np.testing.assert_array_equal(out, [2.0, -2.0, 0.0])
    assert scale.state_dict()["returns"].shape == (3,)
    # without clipping, a reward is divided by the standard deviation, not shifted by the mean
    free = RunningReturnScale(discount=0.0, clip=math.inf, epsilon=0.0)
    free.process(np.array([2.0, 4.0]))
    _, variance = prior_statistics([2.0, 4.0])
    np.testing.assert_allclose(free.process_frozen(np.array([6.0])), [6.0 / math.sqrt(variance)], rtol=1e-6)


def test_running_return_scale_state_dict_resumes_exactly():
    rng = np.random.default_rng(3)
    stream = rng.normal(size=(40, 3))
    whole = RunningReturnScale(discount=0.99)
    for rewards in stream[:20]:
        whole.process(rewards)
    resumed = RunningReturnScale(discount=0.99)
    resumed.load_state_dict(whole.state_dict())
    for step, rewards in enumerate(stream[20:]):
        if step == 5:
            whole.start_episodes([0, 2])
            resumed.start_episodes([0, 2])
        np.testing.assert_array_equal(whole.process(rewards), resumed.process(rewards))
    # process_frozen scales without moving anything
    before = whole.state_dict()
    whole.process_frozen(np.array([5.0, 5.0, 5.0]))
    after = whole.state_dict()
    assert before["count"] == after["count"] and before["variance"] == after["variance"]
    np.testing.assert_array_equal(before["returns"], after["returns"])


def test_running_return_scale_spec_errors():
    stack = build_reward_preprocessing({"type": "running_return_scale", "discount": 0.98})
    assert stack is not None and stack.processed_spec.min_value == -10.0 and stack.processed_spec.max_value == 10.0
    with pytest.raises(SpecError, match=r"reward_preprocessing.clip: must be above 0"):
        build_reward_preprocessing({"type": "running_return_scale", "clip": 0})
    with pytest.raises(SpecError, match=r"reward_preprocessing.discount"):
        build_reward_preprocessing({"type": "running_return_scale", "discount": 1.5})
    states = {"state": StateSpec("state", (17,), "float")}
    with pytest.raises(SpecError, match=r"running_return_scale cannot process 'state' of shape \[17\]: it scales"):
        build_preprocessing({"type": "running_return_scale"}, states)


def test_the_same_numbers_as_sb3_vecnormalize_on_halfcheetah():
    """The reward scale equals VecNormalize's on the same stream (two environments, episodes of 50 steps, so
    returns start over); the states agree once a few hundred have been seen (they differ in the first ones)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    environments = DummyVecEnv([lambda: gym.make("HalfCheetah-v5", max_episode_steps=50) for _ in range(2)])
    environments.seed(0)
    normalized = VecNormalize(environments, gamma=0.98)
    normalized.reset()
    scale = RunningReturnScale(discount=0.98)
    standardize, clip = RunningStandardize(reset_after_batch=False), Clip(min_value=-10.0, max_value=10.0)
    clip.process(standardize.process(normalized.get_original_obs()))
    rng = np.random.default_rng(0)
    state_gaps, episode_starts = [], 0
    for _ in range(150):
        states, rewards, dones, _ = normalized.step(rng.uniform(-1.0, 1.0, size=(2, 6)).astype(np.float32))
        np.testing.assert_allclose(scale.process(normalized.get_original_reward()), rewards, rtol=1e-6, atol=1e-7)
        scale.start_episodes(np.flatnonzero(dones))
        episode_starts += int(dones.sum())
        ours = clip.process(standardize.process(normalized.get_original_obs()))
        state_gaps.append(float(np.abs(ours - states).max()))
    normalized.close()
    assert episode_starts == 6  # three episodes per environment: the returns started over in between
    assert state_gaps[0] > 0.1  # the first states: a pseudo-sample and population variance vs none and sample variance
    assert max(state_gaps[100:]) < 0.02  # after 200 states and more (values of a few units)


def test_frozen_statistics_learn_nothing():
    standardize = RunningStandardize(reset_after_batch=False)
    assert standardize.process_frozen(np.array([[1.0, 2.0]])).tolist() == [[1.0, 2.0]]  # nothing seen yet: as is
    standardize.process(np.array([[0.0, 0.0], [2.0, 4.0]]))  # mean (1, 2), sample std (sqrt 2, 2 sqrt 2)
    before = standardize.state_dict()
    out = standardize.process_frozen(np.array([[3.0, 2.0]]))
    np.testing.assert_allclose(out, [[2.0 / math.sqrt(2.0), 0.0]], rtol=1e-6)
    after = standardize.state_dict()
    assert before["count"] == after["count"] == 2
    np.testing.assert_array_equal(before["mean"], after["mean"])
    # per-episode statistics are the evaluation episode's own: they advance
    episode = RunningStandardize()
    episode.process_frozen(np.array([[1.0]]))
    assert episode.state_dict()["count"].tolist() == [1]


PPO = {
    "type": "ppo",
    "network": [{"type": "dense", "size": 16}],
    "update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 32},
    "memory": {"type": "latest", "capacity": 128},
    "states_preprocessing": [
        {"type": "running_standardize", "reset_after_batch": False},
        {"type": "clip", "min_value": -10.0, "max_value": 10.0},
    ],
    "reward_preprocessing": {"type": "running_return_scale", "discount": 0.9},
    "distributions": {"action": {"type": "gaussian", "log_stddev": -2.0}},
    "seed": 0,
}


def returns_of(agent) -> np.ndarray:
    return agent.reward_preprocessing.state_dict()["0"]["returns"]


def statistics_of(agent) -> dict:
    return agent.preprocessing["state"].state_dict()["0"]  # running_standardize's


def test_an_agent_freezes_statistics_in_independent_acting_and_restarts_returns_per_episode():
    environment = make("gym", gym_id="Hopper-v5")
    environment.seed(0)
    agent = create_agent(PPO, states=environment.states, actions=environment.actions)
    state = environment.reset()
    episodes = 0
    for _ in range(300):
        state, terminal, reward = environment.execute(agent.act(state))
        agent.observe(terminal=terminal, reward=reward, next_states=state if terminal == 2 else None)
        returns = returns_of(agent)
        assert returns[0] != 0.0  # the step's own reward is in the return
        if terminal:
            state, episodes = environment.reset(), episodes + 1
            agent.act(state, independent=True)  # the next episode's first act has not come yet
            assert returns_of(agent)[0] == returns[0]
            statistics = statistics_of(agent)
            agent.act(state, deterministic=True, independent=True)  # evaluation: the statistics stay as they are
            assert statistics_of(agent)["count"] == statistics["count"]
            np.testing.assert_array_equal(statistics_of(agent)["mean"], statistics["mean"])
    assert episodes >= 2 and agent.updates >= 1
    # the training act of a new episode starts its return over, and folds the state into the statistics
    count = statistics_of(agent)["count"]
    state = environment.reset()
    agent.reset()
    agent.act(state)
    assert returns_of(agent)[0] == 0.0
    assert statistics_of(agent)["count"] == count + 1
    environment.close()


def test_a_truncated_rows_final_state_is_standardized_without_joining_the_statistics():
    """As VecNormalize's ``terminal_observation``: the final state of a time-limit truncation stands in for the next
    state (standardized by the run's statistics), and the statistics learn only from states acted on."""
    environment = make("minimal", action_type="float")
    agent = create_agent(PPO, states=environment.states, actions=environment.actions)
    for state in (1.0, 3.0):
        agent.act(np.array([[state]], dtype=np.float32))
        agent.observe(terminal=[2], reward=[0.0], next_states=np.array([[1000.0]], dtype=np.float32))
    statistics = statistics_of(agent)
    assert statistics["count"] == 2 and statistics["mean"].tolist() == [2.0]
    # the stored final state is standardized by the statistics of the run at the time: 1000 is far out, clipped
    agent.act(np.array([[5.0]], dtype=np.float32))
    stored = agent.episodes.flush()
    assert [segment["next_states/state"].tolist() for segment in stored] == [[[10.0], [10.0]]]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"type": "running_return_scale"}, 0.9),
        ("running_return_scale", 0.9),
        ([{"type": "clip", "min_value": -5, "max_value": 5}, {"type": "running_return_scale"}], 0.9),
        ({"type": "running_return_scale", "discount": 0.5}, 0.5),
    ],
    ids=["dict", "name", "in-a-list", "its-own"],
)
def test_running_return_scale_takes_the_agents_discount_unless_it_names_one(step, expected):
    """As rl-baselines3-zoo gives VecNormalize the algorithm's gamma: a reward scale that leaves out its discount
    discounts its returns as the agent does (it was 0.99 whatever the agent's)."""
    environment = make("CartPole-v1")
    agent = create_agent(
        {"type": "ppo", "network": [{"type": "dense", "size": 8}], "discount": 0.9, "reward_preprocessing": step},
        states=environment.states,
        actions=environment.actions,
    )
    scale = [
        preprocessor for preprocessor in agent.reward_preprocessing if isinstance(preprocessor, RunningReturnScale)
    ]
    assert [preprocessor.discount for preprocessor in scale] == [expected]
    state = environment.reset()
    for _ in range(2):  # returns 1, then 1 + discount * 1
        state, terminal, reward = environment.execute(agent.act(state))
        agent.observe(terminal=terminal, reward=reward)
    assert scale[0]._returns.tolist() == [1.0 + expected]
    assert [step.discount for step in build_reward_preprocessing({"type": "running_return_scale"})] == [0.99]  # alone


def test_the_statistics_of_several_normalizers_combine_into_those_of_one_that_saw_every_state():
    """A distributed run's workers each standardize the states of their own environments: combined, their
    statistics are one normalizer's over all those states (count, mean, m2), what the driver's agent applies."""
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc, 2.0, size=(rows, 3)) for loc, rows in ((0.0, 40), (5.0, 7), (-3.0, 1))]
    parts, whole = [], RunningStandardize(reset_after_batch=False)
    for batch in batches:
        part = RunningStandardize(reset_after_batch=False)
        for row in batch:  # one step at a time, as a worker of one environment folds them
            part.process(row[None])
        parts.append(part.state_dict())
        whole.process(batch)
    combined = RunningStandardize.combined([*parts, RunningStandardize(reset_after_batch=False).state_dict()])
    assert combined["count"] == 48
    np.testing.assert_allclose(combined["mean"], whole.state_dict()["mean"], rtol=1e-12)
    np.testing.assert_allclose(combined["m2"], whole.state_dict()["m2"], rtol=1e-12)
    assert RunningStandardize.combined([]) == {"count": 0, "mean": None, "m2": None}
