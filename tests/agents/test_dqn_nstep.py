"""DQN n-step: its targets by hand (returns to the episode's end, or over a horizon, bootstrapped with the
target network's value at cuts and open ends, never after a true terminal), its update unit, and learning."""

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import Transitions
from torchforce.environments import make
from torchforce.spec import SpecError

ENV = make("minimal", action_type="int")
BOOL = make("minimal", action_type="bool")
NETWORK = [{"type": "dense", "size": 8}]


def nstep(env=ENV, **options):
    spec = {"type": "dqn_nstep", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 2}, "seed": 0}
    return create_agent({**spec, **options}, states=env.states, actions=env.actions)


def constant_target_value(agent, values=(1.0, 3.0)):
    """The target network's Q-values become ``values`` whatever the state: V' = max = 3."""
    head = agent.target.heads["action"]
    with torch.no_grad():
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.tensor(values))


def batch(rewards, terminals):
    n = len(rewards)
    states = torch.linspace(-1.0, 1.0, n).view(n, 1)
    return Transitions(
        states={"state": states},
        internals={},
        actions={"action": torch.zeros(n, dtype=torch.int64)},
        reward=torch.tensor(rewards),
        terminal=torch.tensor(terminals, dtype=torch.int8),
        next_states={"state": states + 0.1},
    )


@pytest.mark.parametrize(
    "horizon, terminals, expected",
    [
        # to the episode's end, gamma .5, V' = 3: G2 = 1 + .5*3 (cut) = 2.5, G1 = 1 + 1.25, G0 = 1 + 1.125
        (None, [0, 0, 2], [2.125, 2.25, 2.5]),
        (None, [0, 0, 1], [1.75, 1.5, 1.0]),  # a true terminal: nothing after it
        (None, [1, 0, 0], [1.0, 2.25, 2.5]),  # a new episode starts after row 0; the open end bootstraps
        # one step: G_t = r_t + .5 * V'(s_{t+1}), except after a true terminal
        (1, [0, 0, 2], [2.5, 2.5, 2.5]),
        (1, [0, 0, 1], [2.5, 2.5, 1.0]),
        # two steps: G0 = 1 + .5 + .25*3, G1 = 1 + .5 * 2.5 (the cut ends it), G2 = 2.5
        (2, [0, 0, 2], [2.25, 2.25, 2.5]),
    ],
)
def test_targets_by_hand(horizon, terminals, expected):
    agent = nstep(discount=0.5, horizon=horizon)
    constant_target_value(agent)
    targets = agent._targets(batch([1.0, 1.0, 1.0], terminals))
    np.testing.assert_allclose(targets["action"].numpy(), expected, rtol=1e-6)


def test_double_q_lets_the_online_network_pick_the_action():
    agent = nstep(discount=0.5, double_q_model=True, horizon=1)
    constant_target_value(agent, (1.0, 3.0))
    head = agent.policy.heads["action"]
    with torch.no_grad():  # the online network prefers action 0, whose target value is 1
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.tensor([5.0, 0.0]))
    targets = agent._targets(batch([1.0, 1.0], [0, 2]))
    np.testing.assert_allclose(targets["action"].numpy(), [1.5, 1.5])


def run(agent, episodes, seed=0, env=ENV):
    env.seed(seed)
    for _ in range(episodes):
        state, terminal = env.reset(), 0
        while not terminal:
            state, terminal, reward = env.execute(agent.act(state))
            agent.observe(terminal, reward)


def test_an_update_regresses_q_onto_the_targets_and_syncs_the_target():
    agent = nstep(target_sync_frequency=15, optimizer={"type": "adam", "learning_rate": 0.01})
    run(agent, 4)  # episodes of 10 steps: updates after episodes 2 and 4
    assert agent.updates == 2
    assert agent.target_sync.last_sync == 40
    for online, target in zip(agent.policy.parameters(), agent.target.parameters(), strict=True):
        assert torch.equal(online, target)


@pytest.mark.parametrize("env", [ENV, BOOL], ids=["int", "bool"])
@pytest.mark.parametrize("horizon", [1, 3, None])
def test_learns_the_minimal_task(horizon, env):
    # one update per episode on the latest two, ten gradient steps each (2018's multi_step), some exploration
    # throughout: without replay, an action the greedy policy stops taking is never learned about again
    ten_steps = {"type": "multi_step", "num_steps": 10, "optimizer": {"type": "adam", "learning_rate": 0.01}}
    agent = nstep(
        env,
        update_mode={"unit": "episodes", "batch_size": 2, "frequency": 1},
        discount=0.5,
        horizon=horizon,
        optimizer=ten_steps,
        network=[{"type": "dense", "size": 16}],
        target_sync_frequency=50,
        actions_exploration={"type": "constant", "constant": 0.2},
    )
    run(agent, 60, env=env)
    states = np.array([[-0.8], [-0.3], [0.3], [0.8]], dtype=np.float32)
    assert (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()


def test_bool_actions_have_two_q_values_and_are_stored_as_bools():
    agent = nstep(BOOL, discount=0.5, horizon=1)
    assert type(agent.policy.heads["action"]).__name__ == "Categorical"  # Q(s, False), Q(s, True)
    constant_target_value(agent, (1.0, 3.0))  # V' = Q'(s, True) = 3
    bools = batch([1.0, 1.0], [0, 2])
    bools.actions["action"] = torch.tensor([True, False])
    np.testing.assert_allclose(agent._targets(bools)["action"].numpy(), [2.5, 2.5])
    run(agent, 2, env=BOOL)  # one update, on the two episodes' bool actions
    assert agent.updates == 1
    stored = agent.memory.retrieve_episodes(2)["actions/action"]
    assert stored.dtype == np.bool_ and len(stored) == 20


@pytest.mark.parametrize("env", [ENV, BOOL], ids=["int", "bool"])
def test_acting_is_greedy_unless_exploring_as_in_2018(env):
    # tied Q-values: the argmax (the first action) whether deterministic or not, as 2018's Q models acted
    states = np.zeros((1000, 1), dtype=np.float32)
    for constant, explored in ((0.0, 0.0), (1.0, 0.5)):
        agent = nstep(env, actions_exploration={"type": "constant", "constant": constant})
        constant_target_value(agent, (0.0, 0.0))
        agent.policy.load_state_dict(agent.target.state_dict())
        assert np.mean(agent.act(states, independent=True)) == pytest.approx(explored, abs=0.05)
        assert not agent.act(states, deterministic=True, independent=True).any()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"update_mode": {"unit": "timesteps", "batch_size": 8}}, "agent.update_mode.unit: DQN n-step learns from"),
        ({"horizon": 0}, "agent.horizon: "),
        ({"target_update_weight": 0.0}, "agent.target_update_weight: out of range"),
    ],
)
def test_spec_errors(options, message):
    with pytest.raises(SpecError, match=message):
        nstep(**options)


def test_2018_long_name_and_defaults():
    agent = create_agent({"type": "dqn_nstep_agent", "network": NETWORK}, states=ENV.states, actions=ENV.actions)
    assert type(agent).__name__ == "DQNNstepAgent" and agent.scope == "dqn-nstep"
    assert (agent.update_mode.unit, agent.update_mode.batch_size) == ("episodes", 10)
    assert type(agent.memory).__name__ == "Latest" and agent.memory.capacity == 10_000
    assert agent.horizon is None and agent.target_sync.sync_frequency == 10_000
