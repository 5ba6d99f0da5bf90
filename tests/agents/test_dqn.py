"""DQNAgent options against hand computations: TD targets (plain and double Q, terminal codes, discount), squared and
Huber losses, prioritized replay's weights and priorities, target-network syncs, epsilon exploration, a dueling
network, and the spec errors."""

import warnings

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import Transitions
from torchforce.environments import make
from torchforce.spec import SpecError

ENV = make("minimal", action_type="int")
LINEAR = [{"type": "linear", "size": 1}]


def dqn(network=LINEAR, env=ENV, **options):
    spec = {"type": "dqn", "network": network, "update_mode": {"unit": "timesteps", "batch_size": 4}, "seed": 0}
    return create_agent({**spec, **options}, states=env.states, actions=env.actions)


def set_q(policy, slope, intercept):
    """Q(x) = slope * x + intercept per action: the linear layer passes x through, the head maps it to Q-values."""
    with torch.no_grad():
        policy.network.linear0.weight.fill_(1.0)
        policy.network.linear0.bias.fill_(0.0)
        head = policy.heads["action"].logits
        head.weight.copy_(torch.tensor(slope, dtype=torch.float32).view(2, 1))
        head.bias.copy_(torch.tensor(intercept, dtype=torch.float32))


def column(values):
    return torch.tensor(values, dtype=torch.float32).view(-1, 1)


# Online Q(x) = [x, -x], target Q'(x) = [2x, x + 0.5]. Rows: (x, a, r, terminal, x').
#   row 0: x'=0.25 (online picks 0, target picks 1), row 1: x'=-1 (both pick 1),
#   row 2: terminal 1 (y = r whatever x' is), row 3: terminal 2 (time limit: bootstraps like row 0).
BATCH = {
    "x": [0.5, -0.5, 0.2, 0.1],
    "a": [0, 1, 0, 1],
    "r": [1.0, 0.0, 0.5, -1.0],
    "terminal": [0, 0, 1, 2],
    "next_x": [0.25, -1.0, 3.0, 0.25],
}
Q_TAKEN = np.array([0.5, 0.5, 0.2, -0.1])
GAMMA = 0.9
# y = r + 0.9 * [terminal != 1] * Q'(x', a*)
Y_PLAIN = np.array([1 + GAMMA * 0.75, GAMMA * -0.5, 0.5, -1 + GAMMA * 0.75])  # a* = argmax Q'
Y_DOUBLE = np.array([1 + GAMMA * 0.5, GAMMA * -0.5, 0.5, -1 + GAMMA * 0.5])  # a* = argmax Q, evaluated by Q'


def hand_batch(weights=None, indices=None):
    return Transitions(
        states={"state": column(BATCH["x"])},
        internals={},
        actions={"action": torch.tensor(BATCH["a"])},
        reward=torch.tensor(BATCH["r"]),
        terminal=torch.tensor(BATCH["terminal"], dtype=torch.int8),
        next_states={"state": column(BATCH["next_x"])},
        weights=None if weights is None else torch.tensor(weights, dtype=torch.float32),
        indices=indices,
    )


def hand_agent(**options):
    agent = dqn(**{"discount": GAMMA, **options})
    set_q(agent.policy, [1.0, -1.0], [0.0, 0.0])
    set_q(agent.target, [2.0, 1.0], [0.0, 0.5])
    return agent


def loss_and_errors(agent, batch):
    """The loss of ``batch`` and the |TD errors| the agent records, as in the first loss call of an update."""
    losses = []

    class Measuring:  # an optimizer's step that only computes the loss
        def step(self, loss, data):
            losses.append(loss(data))
            return {}

    _, errors = agent.td_errors.step(Measuring(), agent._loss, batch.flat())
    return losses[0], errors.numpy()


@pytest.mark.parametrize("double_q_model, y", [(False, Y_PLAIN), (True, Y_DOUBLE)])
def test_td_target_by_hand(double_q_model, y):
    agent = hand_agent(double_q_model=double_q_model)
    loss, errors = loss_and_errors(agent, hand_batch())
    delta = y - Q_TAKEN
    assert errors == pytest.approx(np.abs(delta), abs=1e-6)
    assert loss.item() == pytest.approx(np.mean(0.5 * delta**2), rel=1e-6)


@pytest.mark.parametrize("threshold", [None, 0, 0.5])
def test_huber_loss_clips_the_gradient(threshold):
    agent = hand_agent(huber_loss=threshold)
    loss, _ = loss_and_errors(agent, hand_batch())
    loss.backward()
    delta = Y_PLAIN - Q_TAKEN
    clipped = delta if not threshold else np.clip(delta, -threshold, threshold)
    # dL/dbias[a] = -(1/B) * sum of the (clipped) TD errors of the rows that took action a
    actions = np.array(BATCH["a"])
    expected = [-clipped[actions == a].sum() / 4 for a in (0, 1)]
    assert agent.policy.heads["action"].logits.bias.grad.tolist() == pytest.approx(expected, rel=1e-5)
    if threshold:
        small = np.abs(delta) <= threshold
        per_row = np.where(small, 0.5 * delta**2, threshold * (np.abs(delta) - 0.5 * threshold))
        assert loss.item() == pytest.approx(per_row.mean(), rel=1e-6)


def test_importance_weights_multiply_the_per_instance_loss():
    weights = np.array([1.0, 0.0, 0.5, 2.0])
    loss, errors = loss_and_errors(hand_agent(), hand_batch(weights=weights))
    delta = Y_PLAIN - Q_TAKEN
    assert loss.item() == pytest.approx(np.mean(weights * 0.5 * delta**2), rel=1e-6)
    assert errors == pytest.approx(np.abs(delta), abs=1e-6)  # priorities are not weighted


def test_update_gives_prioritized_replay_the_td_errors_from_before_the_step():
    agent = hand_agent(memory={"type": "prioritized_replay", "capacity": 10})
    calls = []
    agent.memory.update_priorities = lambda indices, errors: calls.append((indices, errors))
    info = agent._update(hand_batch(weights=[1.0, 1.0, 1.0, 1.0], indices=np.array([7, 3, 5, 1])))
    ((indices, errors),) = calls
    assert indices.tolist() == [7, 3, 5, 1]
    assert errors == pytest.approx(np.abs(Y_PLAIN - Q_TAKEN), abs=1e-6)
    assert info["td_error"] == pytest.approx(np.abs(Y_PLAIN - Q_TAKEN).mean(), abs=1e-6)
    assert info["loss"] == pytest.approx(np.mean(0.5 * (Y_PLAIN - Q_TAKEN) ** 2), rel=1e-6)


def run(agent, env, steps, seed=0):
    env.seed(seed)
    state = env.reset()
    for _ in range(steps):
        state, terminal, reward = env.execute(agent.act(state))
        agent.observe(terminal=terminal, reward=reward)
        if terminal:
            state = env.reset()


def test_prioritized_replay_end_to_end_with_a_subsampling_optimizer():
    # the optimizer sees half the batch; the priorities still get one |TD error| per retrieved row
    optimizer = {"type": "subsampling_step", "fraction": 0.5, "optimizer": {"type": "adam", "learning_rate": 0.01}}
    agent = dqn(
        network=[{"type": "dense", "size": 8}],
        memory={"type": "prioritized_replay", "capacity": 100},
        optimizer=optimizer,
        update_mode={"unit": "timesteps", "batch_size": 8, "frequency": 4},
    )
    run(agent, ENV, 30)
    assert agent.updates > 0
    priorities = agent.memory.priorities[: len(agent.memory)]
    assert np.any(priorities != 1.0)  # new rows start at the maximal priority; updated rows have their |TD error|


def test_a_time_limit_stores_the_final_state_to_bootstrap_from():
    agent = dqn(memory={"type": "replay", "capacity": 10}, update_mode={"unit": "timesteps", "batch_size": 8})
    agent.act(np.array([0.5], dtype=np.float32))
    agent.observe(terminal=0, reward=1.0)
    agent.act(np.array([0.25], dtype=np.float32))
    agent.observe(terminal=2, reward=2.0, next_states=np.array([-0.75], dtype=np.float32))
    stored = agent.memory.retrieve_timesteps(8)
    columns = stored["states/state"][:, 0], stored["terminal"], stored["next_states/state"][:, 0]
    rows = {
        float(state): (int(terminal), float(following)) for state, terminal, following in zip(*columns, strict=True)
    }
    assert rows == {0.5: (0, 0.25), 0.25: (2, -0.75)}


def test_a_time_limit_without_next_states_warns_once_and_stands_in_the_acted_state():
    agent = dqn(memory={"type": "replay", "capacity": 10}, update_mode={"unit": "timesteps", "batch_size": 8})
    with pytest.warns(UserWarning, match="terminal 2 .* without next_states.* Pass next_states="):
        agent.act(np.array([0.25], dtype=np.float32))
        agent.observe(terminal=2, reward=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per agent
        agent.act(np.array([0.5], dtype=np.float32))
        agent.observe(terminal=2, reward=2.0)
    stored = agent.memory.retrieve_timesteps(8)
    assert set(zip(stored["states/state"][:, 0], stored["next_states/state"][:, 0], strict=True)) == {
        (0.25, 0.25),
        (0.5, 0.5),
    }


def test_hard_target_sync_at_the_sync_frequency():
    agent = dqn(
        network=[{"type": "dense", "size": 8}],
        memory={"type": "replay", "capacity": 100},
        update_mode={"unit": "timesteps", "batch_size": 4, "frequency": 2},
        target_sync_frequency=6,
        optimizer={"type": "gradient_descent", "learning_rate": 0.1},
    )
    update, synced = agent._update, {}

    def recording(batch):
        info = update(batch)
        pairs = zip(agent.policy.parameters(), agent.target.parameters(), strict=True)
        synced[agent.timestep] = all(torch.equal(online, target) for online, target in pairs)
        return info

    agent._update = recording
    run(agent, ENV, 20)
    # updates every 2 timesteps from 4 on; the first syncs, then every 6 timesteps since the last sync
    assert synced == {4: True, 6: False, 8: False, 10: True, 12: False, 14: False, 16: True, 18: False, 20: False}


def test_soft_target_update_moves_the_target_by_the_weight():
    agent = hand_agent(target_update_weight=0.1, target_sync_frequency=5)
    before = [p.detach().clone() for p in agent.target.parameters()]
    agent._update(hand_batch())  # the first update syncs
    online = [p.detach().clone() for p in agent.policy.parameters()]
    for old, new, source in zip(before, agent.target.parameters(), online, strict=True):
        assert torch.allclose(new, old + 0.1 * (source - old), atol=1e-7)
    after_first = [p.detach().clone() for p in agent.target.parameters()]
    agent.timestep = 4
    agent._update(hand_batch())  # 4 - 0 < 5: no sync
    assert all(torch.equal(a, b) for a, b in zip(after_first, agent.target.parameters(), strict=True))
    agent.timestep = 5
    agent._update(hand_batch())
    assert not any(torch.equal(a, b) for a, b in zip(after_first, agent.target.parameters(), strict=True))


ROWS = 4000


def disagreement(agent, timestep):
    """The fraction of explored actions that differ from the greedy ones, acting at ``timestep``."""
    states = np.linspace(-1.0, 1.0, ROWS, dtype=np.float32).reshape(ROWS, 1)
    greedy = agent.act(states, deterministic=True, independent=True)
    agent.timestep = timestep
    return float(np.mean(agent.act(states, independent=True) != greedy))


def test_epsilon_anneal_acts_uniformly_then_greedily():
    exploration = {"type": "epsilon_anneal", "initial_epsilon": 1.0, "final_epsilon": 0.0, "timesteps": 1000}
    agent = dqn(actions_exploration=exploration)
    # with two actions, a uniform action differs from the greedy one half the time: disagreement = epsilon / 2
    assert disagreement(agent, 0) == pytest.approx(0.5, abs=0.03)
    assert disagreement(agent, 500) == pytest.approx(0.25, abs=0.03)
    assert disagreement(agent, 1000) == 0.0
    assert disagreement(agent, 5000) == 0.0
    agent.timestep = 0
    states = np.zeros((ROWS, 1), dtype=np.float32)
    assert np.mean(agent.act(states, independent=True)) == pytest.approx(0.5, abs=0.03)  # uniform at epsilon 1


def test_epsilon_decay_halves_epsilon_every_half_life():
    exploration = {
        "type": "epsilon_decay",
        "initial_epsilon": 1.0,
        "final_epsilon": 0.0,
        "timesteps": 1000,
        "half_lives": 10,
        "start_timestep": 100,
    }
    agent = dqn(actions_exploration=exploration)
    assert disagreement(agent, 50) == pytest.approx(0.5, abs=0.03)  # initial before the start
    assert disagreement(agent, 200) == pytest.approx(0.25, abs=0.03)  # one half-life (100 steps)
    assert disagreement(agent, 300) == pytest.approx(0.125, abs=0.03)
    assert disagreement(agent, 3000) == 0.0


def test_dueling_network_learns_end_to_end():
    network = [{"type": "dense", "size": 8}, {"type": "dueling", "size": 4}]
    agent = dqn(
        network=network,
        update_mode={"unit": "timesteps", "batch_size": 8, "frequency": 2},
        memory={"type": "replay", "capacity": 100},
        double_q_model=True,
        huber_loss=1.0,
    )
    dueling = agent.policy.network.dueling0
    before = dueling.advantage.weight.detach().clone()
    update, infos = agent._update, []
    agent._update = lambda batch: infos.append(update(batch)) or infos[-1]
    run(agent, ENV, 30)
    assert len(infos) == agent.updates > 0
    assert all(np.isfinite(float(info["loss"])) and np.isfinite(float(info["td_error"])) for info in infos)
    assert not torch.equal(before, dueling.advantage.weight)
    assert 0 <= int(agent.act(ENV.reset(), deterministic=True, independent=True)) < 2


@pytest.mark.parametrize("action_type", ["float", "bounded"])
def test_dqn_rejects_float_actions(action_type):
    with pytest.raises(SpecError) as error:
        dqn(env=make("minimal", action_type=action_type))
    assert str(error.value) == (
        "agent.actions.action.type: DQN picks actions by argmax over Q-values, so only bool and int actions work; "
        'expected "bool" or "int", got "float".\n  Use naf or ddpg for float actions, or ppo.'
    )


BOOL = make("minimal", action_type="bool")


def test_bool_actions_get_two_q_values_and_are_acted_and_stored_as_bools():
    agent = dqn(env=BOOL, memory={"type": "replay", "capacity": 10})
    head = agent.policy.heads["action"]
    assert type(head).__name__ == "Categorical" and head.num_actions == 2  # Q(s, False), Q(s, True)
    acted = {}
    for state, terminal in ((0.5, 0), (-0.5, 1)):
        acted[state] = agent.act(np.array([state], dtype=np.float32))
        agent.observe(terminal=terminal, reward=1.0)
    assert all(isinstance(action, np.bool_) for action in acted.values())
    stored = agent.memory.retrieve_timesteps(8)
    assert stored["actions/action"].dtype == np.bool_
    assert all(
        acted[float(state)] == action
        for state, action in zip(stored["states/state"][:, 0], stored["actions/action"], strict=True)
    )


@pytest.mark.parametrize("double_q_model, y", [(False, Y_PLAIN), (True, Y_DOUBLE)])
def test_td_target_by_hand_with_bool_actions(double_q_model, y):
    # the hand batch with actions 0/1 as False/True: Q(s, False) and Q(s, True) are the head's two outputs
    agent = dqn(env=BOOL, discount=GAMMA, double_q_model=double_q_model)
    set_q(agent.policy, [1.0, -1.0], [0.0, 0.0])
    set_q(agent.target, [2.0, 1.0], [0.0, 0.5])
    batch = hand_batch()
    batch.actions["action"] = batch.actions["action"].bool()
    loss, errors = loss_and_errors(agent, batch)
    assert errors == pytest.approx(np.abs(y - Q_TAKEN), abs=1e-6)
    assert loss.item() == pytest.approx(np.mean(0.5 * (y - Q_TAKEN) ** 2), rel=1e-6)


def test_bool_actions_learn_the_minimal_task():
    agent = dqn(
        env=BOOL,
        network=[{"type": "dense", "size": 16}],
        memory={"type": "replay", "capacity": 500},
        update_mode={"unit": "timesteps", "batch_size": 16, "frequency": 2},
        target_sync_frequency=20,
        optimizer={"type": "adam", "learning_rate": 0.01},
        discount=0.5,
        actions_exploration={"type": "constant", "constant": 0.3},
    )
    run(agent, BOOL, 600)
    assert agent.updates > 0
    states = np.array([[-0.8], [-0.3], [0.3], [0.8]], dtype=np.float32)
    assert (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()


def test_a_bool_head_without_q_values_is_refused():
    with pytest.raises(SpecError) as error:
        dqn(env=BOOL, distributions={"action": "bernoulli"})
    assert str(error.value).startswith(
        "agent.distributions.action: a bernoulli head has no Q-values, and the dqn agent reads its Q-values off the "
        'action\'s head; expected "categorical" (or leave it out).'
    )


@pytest.mark.parametrize("env", [ENV, BOOL], ids=["int", "bool"])
def test_acting_is_greedy_unless_exploring_as_in_2018(env):
    # tied Q-values: 2018's Q models took the argmax (the first action) whether deterministic or not, never a
    # sample of softmax(Q); only epsilon-greedy exploration picks other actions, and deterministic turns it off
    states = np.zeros((ROWS, 1), dtype=np.float32)
    agent = dqn(env=env)
    set_q(agent.policy, [0.0, 0.0], [0.0, 0.0])
    for deterministic in (False, True):
        assert not agent.act(states, deterministic=deterministic, independent=True).any()
    exploring = dqn(env=env, actions_exploration={"type": "constant", "constant": 1.0})
    set_q(exploring.policy, [0.0, 0.0], [0.0, 0.0])
    assert np.mean(exploring.act(states, independent=True)) == pytest.approx(0.5, abs=0.03)
    assert not exploring.act(states, deterministic=True, independent=True).any()


@pytest.mark.parametrize("unit", ["episodes", "sequences"])
def test_dqn_rejects_episode_and_sequence_update_modes(unit):
    with pytest.raises(SpecError) as error:
        dqn(update_mode={"unit": unit, "batch_size": 4})
    assert str(error.value) == (
        "agent.update_mode.unit: DQN learns from single transitions sampled from its replay memory; "
        f'expected "timesteps", got "{unit}".'
    )


@pytest.mark.parametrize(
    "options, message",
    [
        ({"target_update_weight": 0.0}, "target_update_weight: out of range; expected a number in (0, 1], got 0.0."),
        ({"target_update_weight": 1.5}, "target_update_weight: out of range; expected a number in (0, 1], got 1.5."),
        ({"target_sync_frequency": 0}, "target_sync_frequency: out of range; expected an integer >= 1, got 0."),
        ({"huber_loss": -1.0}, "huber_loss: out of range; expected a number in [0.0, inf], got -1.0."),
        ({"discount": 1.5}, "discount: out of range; expected a number in [0.0, 1.0], got 1.5."),
        ({"double_q_model": "yes"}, 'double_q_model: not a boolean; expected true or false, got "yes".'),
        (
            {"entropy_regularization": -0.1},
            "entropy_regularization: out of range; expected a number in [0.0, inf], got -0.1.",
        ),
        ({"optimizer": {"type": "adamm"}}, "optimizer.type: unknown optimizer"),
        ({"network": None}, "network: dqn needs a network."),
    ],
)
def test_spec_errors(options, message):
    with pytest.raises(SpecError) as error:
        dqn(**options)
    assert str(error.value).startswith("agent." + message)
