"""TensorForce 0.4's agent-test protocol, run on torchforce (issue "TensorForce 0.4 fidelity", item 6).

0.4 tested every agent on ``MinimalTest`` (here the ``minimal_test`` environment) with one action of each kind the
agent supports, a network of two dense layers of 32, and the agent's own small config from its test module
(``tensorforce/tests/test_<agent>_agent.py``; the protocol itself is ``base_test.py``/``base_agent_test.py``):

- an episode is good when its reward per step is at least 0.8 (``pass_threshold``);
- a run trains for up to 2000 episodes and stops as soon as the last 100 episodes are all good; it passes if they
  are when it stops;
- a case passes when 2 of 3 runs pass (0.4 stopped after the second pass; here a case also stops once 2 passes
  can no longer be reached, which decides the same).

0.4 ran the multi-action case (``test_multi``: several action kinds at once, a network with one branch per state
joined by a product) for 100 episodes without a pass criterion (``base_test_run``): so do the smoke tests here.
Its ``test_lstm`` case (an ``internal_lstm`` network on the int action) is not an action kind and is not run here.
Constant and random agents do not learn: the constant agent giving the right action passes the protocol, and the
random agent runs 100 episodes of every kind.

Configs are translated to torchforce's keys; each names the 0.4 test it comes from. One case departs from its
config, PPO on the unbounded float (``DEPARTURES``, with the measurements that led to it). 0.4 acted stochastically in
these runs (``deterministic`` false): Q agents sampled from a softmax over their Q-values, without exploration.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.environments.minimal_test import MinimalTest
from torchforce.execution import Runner

PASS_THRESHOLD = 0.8  # reward per step of a good episode
EPISODES = 2000
WINDOW = 100  # the last this many episodes must all be good
RUNS = 3
NEEDED = 2
SEEDS = tuple(range(RUNS))

NETWORK = [{"type": "dense", "size": 32}, {"type": "dense", "size": 32}]

# The configs of 0.4's agent tests, keyed by torchforce agent type.
CONFIGS: dict[str, dict[str, Any]] = {
    # tensorforce/tests/test_dqn_agent.py (exclude_float, exclude_bounded)
    "dqn": {
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 8},
        "memory": {"type": "replay", "include_next_states": True, "capacity": 100},
        "optimizer": {"type": "adam", "learning_rate": 1e-2},
        "states_preprocessing": [{"type": "running_standardize"}, {"type": "sequence"}],
        "target_sync_frequency": 10,
    },
    # tensorforce/tests/test_dqn_nstep_agent.py (exclude_float, exclude_bounded)
    "dqn_nstep": {
        "update_mode": {"unit": "episodes", "batch_size": 4, "frequency": 4},
        "memory": {"type": "latest", "include_next_states": True, "capacity": 100},
        "optimizer": {"type": "adam", "learning_rate": 1e-2},
    },
    # tensorforce/tests/test_dqfd_agent.py (exclude_float, exclude_bounded; pre_run: 50 demonstration steps of
    # the right action, then pretrain(steps=1000))
    "dqfd": {
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
        "memory": {"type": "replay", "include_next_states": True, "capacity": 100},
        "optimizer": {"type": "adam", "learning_rate": 1e-2},
        "target_sync_frequency": 10,
        "demo_memory_capacity": 100,
        "demo_sampling_ratio": 0.2,
    },
    # tensorforce/tests/test_naf_agent.py (float only)
    "naf": {
        "actions_exploration": {"type": "ornstein_uhlenbeck"},
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
        "memory": {"type": "replay", "include_next_states": True, "capacity": 100},
        "optimizer": {"type": "adam", "learning_rate": 1e-2},
        "target_sync_frequency": 10,
    },
    # tensorforce/tests/test_ddpg_agent.py (float only; critic_network in 0.4.3's {size_t0, size_t1} form)
    "ddpg": {
        "update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 32},
        "memory": {"type": "replay", "include_next_states": True, "capacity": 10000},
        "optimizer": {"type": "adam", "learning_rate": 1e-3},
        "critic_optimizer": {"type": "adam", "learning_rate": 1e-4},
        "critic_network": {"size_t0": 64, "size_t1": 64},
        "actions_exploration": {"type": "ornstein_uhlenbeck", "mu": 0.0, "sigma": 0.3, "theta": 0.15},
        "target_sync_frequency": 32,
        "target_update_weight": 0.99,
    },
    # tensorforce/tests/test_vpg_agent.py
    "vpg": {
        "update_mode": {"unit": "episodes", "batch_size": 4, "frequency": 4},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 100},
        "optimizer": {"type": "adam", "learning_rate": 1e-2},
    },
    # tensorforce/tests/test_ppo_agent.py
    "ppo": {
        "update_mode": {"unit": "episodes", "batch_size": 4, "frequency": 4},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 100},
        "step_optimizer": {"type": "adam", "learning_rate": 1e-3},
        "subsampling_fraction": 0.3,
        "optimization_steps": 30,
    },
    # tensorforce/tests/test_trpo_agent.py
    "trpo": {
        "update_mode": {"unit": "episodes", "batch_size": 4, "frequency": 4},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 100},
        "learning_rate": 1e-2,
    },
}

# The one case that departs from 0.4's config, and why. PPO without a baseline on the unbounded float is a coin flip
# under 0.4's config: every return is positive, so each of its 30 steps on 4-5 sampled timesteps pulls the
# Gaussian towards those few actions, its std falls to about 0.01 within 200 episodes, often before the mean has
# reached the 0.8 that an episode of one step needs, and MinimalTest's reward, flat once y is 1, then lets the mean
# wander down (to 0, where every return is 0 and nothing moves it). Measured 2026-12-02 with seeds 0-5: 2 of 6 runs
# passed on an Intel CPU with AVX-512, 4 of 6 with MKL held to its AVX2 code (MKL_CBWR=AVX2), as on the AMD CPUs
# before: which seeds pass depends on the CPU's rounding. 0.4 computed the same returns (no normalization, as
# checked in its PGModel), so it had the same odds. With each batch's advantages normalized (SB3 and CleanRL
# normalize by default, per minibatch) 8 of 8 seeds passed, as did 8 of 8 with a state-independent std; an entropy
# bonus of 0.01 passed 3 of 6.
DEPARTURES: dict[tuple[str, str], dict[str, Any]] = {("ppo", "float"): {"normalize_advantages": True}}

# The action kinds each 0.4 agent test ran (its exclude_* flags), for one action and for several at once.
KINDS = {
    "dqn": ("bool", "int"),
    "dqn_nstep": ("bool", "int"),
    "dqfd": ("bool", "int"),
    "naf": ("float",),
    "ddpg": ("float",),
    "vpg": ("bool", "int", "float", "bounded"),
    "ppo": ("bool", "int", "float", "bounded"),
    "trpo": ("bool", "int", "float", "bounded"),
}
MULTI = ("dqn", "dqn_nstep", "dqfd", "vpg", "ppo", "trpo")  # NAF and DDPG excluded multi
MULTI_SHAPES = {"bool": (), "int": (2,), "float": (1, 1), "bounded": (1,)}  # as 0.4's test_multi

# The right action of each kind (0.4's DQfD demonstrations: True, 1, 1.0).
RIGHT = {"bool": True, "int": 1, "float": 1.0, "bounded": 1.0}


def good(reward: float, length: int) -> bool:
    return reward / length >= PASS_THRESHOLD


def last_window_good(runner: Runner) -> bool:
    """0.4's pass criterion: at least WINDOW episodes, and the last WINDOW of them all good."""
    pairs = list(zip(runner.episode_rewards[-WINDOW:], runner.episode_timesteps[-WINDOW:], strict=True))
    return len(pairs) == WINDOW and all(good(reward, length) for reward, length in pairs)


def multi_network(kinds: tuple[str, ...]) -> list:
    """0.4's test_multi network: per state, two dense layers of 16 into a named output; the outputs multiplied,
    then one dense layer of 16."""
    branches = [
        [
            {"type": "input", "names": kind},
            {"type": "dense", "size": 16},
            {"type": "dense", "size": 16},
            {"type": "output", "name": f"{kind}-emb"},
        ]
        for kind in kinds
    ]
    joined = {"type": "input", "names": [f"{kind}-emb" for kind in kinds], "aggregation_type": "product"}
    return [*branches, [joined, {"type": "dense", "size": 16}]]


def right_actions(environment: MinimalTest) -> Any:
    actions = {kind: np.full(shape, RIGHT[kind]) for kind, shape in environment.specification.items()}
    return next(iter(actions.values())) if environment.single else actions


def demonstrate(agent: Any, environment: MinimalTest, steps: int = 50, pretrain: int = 1000) -> None:
    """0.4's DQfD pre_run: ``steps`` steps of the right action as demonstrations, then ``pretrain`` updates."""
    demonstrations, terminal, following = [], 1, None
    for _ in range(steps):
        states = environment.reset() if terminal else following
        actions = right_actions(environment)
        following, terminal, reward = environment.execute(actions)
        demonstrations.append({"states": states, "actions": actions, "terminal": terminal, "reward": reward})
    agent.import_demonstrations(demonstrations)
    agent.pretrain(pretrain)


def make_agent(
    agent_type: str, environment: MinimalTest, seed: int, network: Any = None, departure: dict | None = None
) -> Any:
    agent = create_agent(
        {"type": agent_type, **CONFIGS[agent_type], **(departure or {})},
        states=environment.states,
        actions=environment.actions,
        network=network or NETWORK,
        seed=seed,
    )
    if agent_type == "dqfd":
        demonstrate(agent, environment)
    return agent


def run_protocol(agent_type: str, kind: str, seed: int) -> dict[str, Any]:
    """One 0.4 run: up to EPISODES episodes, stopping once the last WINDOW are all good."""
    environment = MinimalTest({kind: ()}, seed=seed)
    start = time.perf_counter()
    agent = make_agent(agent_type, environment, seed, departure=DEPARTURES.get((agent_type, kind)))
    runner = Runner(agent, environment)
    runner.run(num_episodes=EPISODES, episode_finished=lambda r: not last_window_good(r))
    agent.close()
    rates = [reward / length for reward, length in zip(runner.episode_rewards, runner.episode_timesteps, strict=True)]
    tail = rates[-WINDOW:]
    return {
        "passed": last_window_good(runner),
        "episodes": runner.episode,
        "seconds": round(time.perf_counter() - start, 1),
        "good_of_last": f"{sum(rate >= PASS_THRESHOLD for rate in tail)}/{len(tail)}",
        "reward_per_step_last": round(float(np.mean(tail)), 3),
        # the learning curve: mean reward per step over each block of 200 episodes
        "curve": [round(float(np.mean(rates[i : i + 200])), 2) for i in range(0, len(rates), 200)],
    }


def run_case(agent_type: str, kind: str) -> dict[int, dict[str, Any]]:
    """Runs with seeds 0, 1, 2 until NEEDED pass or can no longer pass."""
    outcomes: dict[int, dict[str, Any]] = {}
    for seed in SEEDS:
        outcomes[seed] = run_protocol(agent_type, kind, seed)
        passed = sum(outcome["passed"] for outcome in outcomes.values())
        if passed >= NEEDED or passed + RUNS - len(outcomes) < NEEDED:
            break
    return outcomes


CASES = [(agent_type, kind) for agent_type, kinds in KINDS.items() for kind in kinds]


@pytest.mark.learning
@pytest.mark.parametrize("agent_type, kind", CASES)
def test_agent_passes_tf04_protocol(agent_type: str, kind: str) -> None:
    outcomes = run_case(agent_type, kind)
    passed = sum(outcome["passed"] for outcome in outcomes.values())
    assert passed >= NEEDED, f"{agent_type} on {kind}: {passed} of {len(outcomes)} runs passed; by seed: {outcomes}"


@pytest.mark.learning
@pytest.mark.parametrize("agent_type", MULTI)
def test_agent_runs_multi_actions(agent_type: str) -> None:
    """0.4's test_multi: the agent's action kinds at once (0.4's shapes), 100 episodes, no pass criterion."""
    kinds = KINDS[agent_type]
    environment = MinimalTest({kind: MULTI_SHAPES[kind] for kind in kinds}, seed=0)
    agent = make_agent(agent_type, environment, seed=0, network=multi_network(kinds))
    runner = Runner(agent, environment)
    runner.run(num_episodes=WINDOW)
    agent.close()
    assert runner.episode == WINDOW
    pairs = zip(runner.episode_rewards, runner.episode_timesteps, strict=True)
    assert all(0.0 <= reward / length <= 1.0 for reward, length in pairs)


@pytest.mark.parametrize("kind", ["bool", "int", "float", "bounded"])
def test_constant_right_action_passes_at_once(kind: str) -> None:
    """The constant agent giving the right action earns 1 per step, so the protocol passes at episode 100."""
    environment = MinimalTest({kind: ()}, seed=0)
    agent = create_agent(
        {"type": "constant", "action_values": RIGHT[kind]}, states=environment.states, actions=environment.actions
    )
    runner = Runner(agent, environment)
    runner.run(num_episodes=EPISODES, episode_finished=lambda r: not last_window_good(r))
    assert runner.episode == WINDOW and last_window_good(runner)
    assert runner.episode_rewards == [float(length) for length in runner.episode_timesteps]


@pytest.mark.parametrize("kind", ["bool", "int", "float", "bounded"])
def test_random_agent_runs_and_does_not_pass(kind: str) -> None:
    environment = MinimalTest({kind: ()}, seed=0)
    agent = create_agent("random", states=environment.states, actions=environment.actions, seed=0)
    runner = Runner(agent, environment)
    runner.run(num_episodes=WINDOW, episode_finished=lambda r: not last_window_good(r))
    assert runner.episode == WINDOW and not last_window_good(runner)
