"""VPG: the policy-gradient loss by hand, one optimizer step per update on the whole batch and then one of the
baseline's, the 2018 arguments and their errors."""

import re

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import Transitions
from torchforce.environments import make
from torchforce.spec import SpecError

ENV = make("minimal", action_type="int")
NETWORK = [{"type": "dense", "size": 8}]
BASELINE = {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}}


def vpg(**options):
    spec = {"type": "vpg", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 2}, "seed": 0}
    return create_agent({**spec, **options}, states=ENV.states, actions=ENV.actions)


def transitions(rewards, terminals):
    n = len(rewards)
    states = torch.linspace(-1.0, 1.0, n).view(n, 1)
    return Transitions(
        states={"state": states},
        internals={},
        actions={"action": torch.tensor([0, 1] * (n // 2))},
        reward=torch.tensor(rewards),
        terminal=torch.tensor(terminals, dtype=torch.int8),
        next_states={"state": states + 0.1},
    )


def run(agent, episodes):
    ENV.seed(0)
    for _ in range(episodes):
        state, terminal = ENV.reset(), 0
        while not terminal:
            state, terminal, reward = ENV.execute(agent.act(state))
            agent.observe(terminal, reward)


def test_loss_is_minus_the_mean_of_log_prob_times_advantage():
    agent = vpg(discount=0.5)
    data = agent._with_advantages(transitions([1.0, 2.0, 3.0, 4.0], [0, 1, 0, 1]))
    # no baseline: advantages are the returns 1 + .5*2, 2, 3 + .5*4, 4
    assert data["advantages"].tolist() == [2.0, 2.0, 5.0, 4.0]
    with torch.no_grad():
        params, _, _ = agent.policy({"state": data["states/state"]}, {})
        log_prob = agent.policy.log_prob(params, {"action": data["actions/action"]})
        expected = -(log_prob * torch.tensor([2.0, 2.0, 5.0, 4.0])).mean()
        assert agent._loss(data).item() == pytest.approx(expected.item(), rel=1e-6)


def test_entropy_regularization_subtracts_the_mean_entropy():
    data = vpg()._with_advantages(transitions([1.0, 0.0], [0, 1]))
    plain, regularized = vpg(), vpg(entropy_regularization=0.5)
    with torch.no_grad():
        params, _, _ = plain.policy({"state": data["states/state"]}, {})
        entropy = plain.policy.entropy(params).mean().item()
        assert regularized._loss(data).item() - plain._loss(data).item() == pytest.approx(-0.5 * entropy, rel=1e-5)


def count(optimizer, sizes, name):
    step = optimizer.step

    def counted(loss_fn, data, **kwargs):
        sizes.setdefault(name, []).append(len(data["reward"]))
        return step(loss_fn, data, **kwargs)

    optimizer.step = counted


def test_one_step_on_the_batch_per_update_then_one_for_the_baseline():
    agent = vpg(**BASELINE)
    sizes = {}
    count(agent.optimizer, sizes, "policy")
    count(agent.baseline_optimizer, sizes, "baseline")
    run(agent, 4)
    assert agent.updates == 2
    assert sizes == {"policy": [20, 20], "baseline": [20, 20]}  # two episodes of 10 steps per update


def test_learning_moves_the_policy_towards_rewarded_actions():
    # the minimal environment rewards action 1 when the state is positive, 0 otherwise
    agent = vpg(
        optimizer={"type": "adam", "learning_rate": 0.05},
        update_mode={"unit": "episodes", "batch_size": 4},
        **BASELINE,
        gae_lambda=0.9,
    )
    states = np.array([[-0.8], [-0.4], [0.4], [0.8]], dtype=np.float32)

    def greedy_correct():
        actions = agent.act(states, deterministic=True, independent=True)
        return int(np.sum(actions == (states[:, 0] > 0)))

    run(agent, 60)
    assert agent.updates == 15
    assert greedy_correct() == 4


@pytest.mark.parametrize(
    "options, message",
    [
        ({"gae_lambda": 0.9}, "agent.baseline_mode: gae_lambda needs a baseline_mode"),
        ({"baseline_mode": "states"}, "agent.baseline: a baseline_mode needs a baseline spec"),
        ({**BASELINE, "baseline_mode": "value"}, "agent.baseline_mode: "),
        ({"discount": 1.5}, "agent.discount: "),
        ({"optimizer": {"type": "adamm"}}, "Did you mean 'adam'"),
    ],
)
def test_spec_errors(options, message):
    with pytest.raises(SpecError, match=message):
        vpg(**options)


@pytest.mark.parametrize("agent_type", ["vpg", "trpo"])
@pytest.mark.parametrize("memory", ["replay", "prioritized_replay"])
def test_timesteps_from_a_replay_memory_are_refused(agent_type, memory):
    # a replay memory hands out random rows: their returns and GAE would chain the rewards of other episodes (the
    # spec's PPO/TRPO check; VPG's returns are the same sums). Whole episodes from a replay memory are fine.
    spec = {
        "type": agent_type,
        "network": NETWORK,
        "update_mode": {"unit": "timesteps", "batch_size": 8},
        "memory": {"type": memory, "capacity": 100},
    }
    expected = (
        f"memory.type: {agent_type.upper()} updating on timesteps learns from the most recent ones; expected "
        f'"latest", got "{memory}".'
    )
    with pytest.raises(SpecError, match=re.escape(expected)):
        create_agent(spec, states=ENV.states, actions=ENV.actions)
    if memory == "replay":  # prioritized_replay draws single timesteps only
        episodes = {**spec, "update_mode": {"unit": "episodes", "batch_size": 2}}
        assert create_agent(episodes, states=ENV.states, actions=ENV.actions).memory.capacity == 100


def test_2018_long_name_and_default_update_mode():
    agent = create_agent({"type": "vpg_agent", "network": NETWORK}, states=ENV.states, actions=ENV.actions)
    assert type(agent).__name__ == "VPGAgent"
    assert (agent.update_mode.unit, agent.update_mode.batch_size) == ("episodes", 10)
