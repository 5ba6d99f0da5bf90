"""Agents with a recurrent policy (``internal_lstm``): the LSTM state is carried from act to act within an episode,
starts over at zeros after a terminal and after ``reset()`` (per row in a batch), and a checkpoint taken mid-episode
continues exactly. Then ``import_experience``: the exact memory rows it writes, for a replay and a latest memory,
every step it refuses (with the step and key named), and a ``sequence`` preprocessor stacking each imported
episode's frames from its start.

The expected recurrent state of every step is computed from the agent's own network: one step of it on the state
acted on, from the previous step's state (zeros at an episode start). Runs are driven by a fixed stream of states
(see test_checkpoint.py); runs that are compared are done one after the other, since torch's global RNG is part of
an agent's state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.environments import make
from torchforce.spec import SpecError

RNN = [{"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 8}]
LSTM = "internal_lstm0"  # the network internal of the first internal_lstm layer: (c, h), shape (2, 8) per row
SPECS = {
    "ppo": {
        "type": "ppo",
        "network": RNN,
        "update_mode": {"unit": "episodes", "batch_size": 2},
        "optimization_steps": 3,
        "seed": 1,
    },
    "dqn": {
        "type": "dqn",
        "network": RNN,
        "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
        "memory": {"type": "replay", "capacity": 64},
        "target_sync_frequency": 6,
        "seed": 2,
    },
}
STATES = np.random.default_rng(0).uniform(-1.0, 1.0, (64, 2, 1)).astype(np.float32)
LENGTH = 5  # episode length of the stream


def build(name: str, action_type: str = "int", **changes: Any):
    env = make("minimal", action_type=action_type)
    return create_agent({**SPECS[name], **changes}, states=env.states, actions=env.actions)


def zeros(rows: int) -> torch.Tensor:
    return torch.zeros(rows, 2, 8)


def lstm_step(agent, states: np.ndarray, internal: torch.Tensor) -> torch.Tensor:
    """The recurrent state the agent's network makes of ``states`` [rows, 1] from ``internal`` [rows, 2, 8]."""
    with torch.no_grad():
        _, internals = agent.policy.network({"state": torch.from_numpy(states)}, {LSTM: internal})
    return internals[LSTM]


def rewards(actions: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The minimal environment's scoring: int actions earn 1 for ``x > 0``, float actions ``1 - |a - x|``."""
    if actions.dtype.kind == "f":
        return np.maximum(0.0, 1.0 - np.abs(actions - x)).astype(np.float32)
    return (actions == (x > 0)).astype(np.float32)


def step(agent, t: int, *, deterministic: bool = False) -> np.ndarray:
    """Step ``t`` of the stream with one row: act, then observe; episodes last ``LENGTH`` steps."""
    state = STATES[t, 0]
    action = np.asarray(agent.act(state, deterministic=deterministic))
    agent.observe(terminal=int((t + 1) % LENGTH == 0), reward=float(rewards(action.reshape(1), state)[0]))
    return action


def drive(agent, start: int, stop: int) -> None:
    for t in range(start, stop):
        step(agent, t)


# ---------------------------------------------------------------------------------------------- recurrent state


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_recurrent_state_is_carried_within_an_episode_and_restarts_after_a_terminal(name):
    agent = build(name)
    internal, before = zeros(1), []
    for t in range(2 * LENGTH):
        before.append(internal)
        agent.act(STATES[t, 0])
        expected = lstm_step(agent, STATES[t, :1], internal)
        assert torch.equal(agent.episodes.internals[LSTM], expected), f"step {t}"
        assert not torch.equal(expected, internal)  # every step moves the state on
        terminal = (t + 1) % LENGTH == 0
        agent.observe(terminal=int(terminal), reward=0.0)
        internal = zeros(1) if terminal else expected
    assert agent.episode == 2 and agent.updates > 0
    # each stored step holds the recurrent state the agent acted from: zeros at the start of both episodes
    stored = agent.memory.state_dict()["data"][f"internals/{LSTM}"][: len(agent.memory)]
    assert len(agent.memory) == 2 * LENGTH
    np.testing.assert_array_equal(stored, torch.cat(before).numpy())
    assert not stored[[0, LENGTH]].any() and stored[1:LENGTH].all() and stored[LENGTH + 1 :].all()


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_each_stored_step_holds_the_recurrent_state_its_next_state_starts_from(name):
    """``next_internals``: what acting on the step left, the state the next step acts from within an episode; for a
    step that ended it (a truncation here, whose next state is the final one given to observe) the state acting
    left, not the zeros the next episode starts from."""
    agent = build(name)
    internal, after = zeros(1), []
    for t in range(2 * LENGTH):
        agent.act(STATES[t, 0])
        after.append(lstm_step(agent, STATES[t, :1], internal))
        end = (t + 1) % LENGTH == 0
        agent.observe(terminal=2 if end and t < LENGTH else int(end), reward=0.0, next_states=STATES[t + 1, 0])
        internal = zeros(1) if end else after[-1]
    data, size = agent.memory.state_dict()["data"], len(agent.memory)
    assert size == 2 * LENGTH and data["terminal"][:size].tolist() == [0] * 4 + [2] + [0] * 4 + [1]
    following, own = data[f"next_internals/{LSTM}"][:size], data[f"internals/{LSTM}"][:size]
    np.testing.assert_array_equal(following, torch.cat(after).numpy())
    np.testing.assert_array_equal(following[: LENGTH - 1], own[1:LENGTH])  # within the episode: the next step's
    assert following[LENGTH - 1].all() and not own[LENGTH].any()  # the truncated step's, not the next episode's


FLOAT_SPECS = {  # recurrent agents of float actions, learning from a replay memory
    "ddpg": {"type": "ddpg", "critic_network": [{"type": "dense", "size": 8}], "random_timesteps": 0},
    "naf": {"type": "naf"},
}


@pytest.mark.parametrize("name", ["dqn", "dqn_nstep", "dqfd", "ddpg", "naf", "ppo"])
def test_values_of_the_next_state_start_from_the_next_internals(name):
    """The targets of every agent that bootstraps (a TD target, n-step returns, PPO's value of a cut segment's next
    state) run the network on the next state from the recurrent state acting left there: changing the stored next
    internals changes them, where the step's own internals once stood in."""
    from torchforce.agents.transitions import Transitions

    float_actions = name in FLOAT_SPECS
    env = make("minimal", action_type="float" if float_actions else "int")
    spec = {
        "type": name,
        "network": RNN,
        "update_mode": {"unit": "timesteps", "batch_size": 64, "frequency": 64},
        "memory": {"type": "replay" if name != "ppo" else "latest", "capacity": 64},
        "seed": 3,
        **FLOAT_SPECS.get(name, {}),
    }
    if name == "dqn_nstep":  # learns from whole episodes; n-step returns bootstrap within them
        spec.update(update_mode={"unit": "episodes", "batch_size": 10}, memory={"type": "latest", "capacity": 1000})
        spec["horizon"] = 2
    if name == "ppo":
        spec["baseline_mode"], spec["baseline"] = "network", {"type": "mlp", "sizes": [8]}  # on the embedding
        spec["baseline_optimizer"] = {"type": "adam", "learning_rate": 1e-3}
    agent = create_agent(spec, states=env.states, actions=env.actions)
    for t in range(12):  # two episodes of 5, then two steps cut open
        agent.act(STATES[t, 0])
        agent.observe(terminal=int((t + 1) % LENGTH == 0 and t < 10), reward=float(t % 3))
    if name == "ppo":
        agent.act(STATES[12, 0])  # the two open steps wait for this state, and are cut for an update
        segments = agent.episodes.flush()
        contents = {key: np.concatenate([segment[key] for segment in segments]) for key in segments[0]}
    else:
        contents = agent.memory.contents()
    batch = Transitions.from_numpy(contents, torch.device("cpu"))
    assert (batch.terminal != 1).any() and len(batch.next_internals[LSTM]) == len(batch)
    moved = Transitions.from_numpy(contents, torch.device("cpu"))
    moved.next_internals = {LSTM: batch.next_internals[LSTM] + 0.5}

    def targets(transitions: Transitions) -> torch.Tensor:
        with torch.no_grad():
            if name == "dqn_nstep":
                return torch.cat([value.reshape(-1) for value in agent._targets(transitions).values()])
            if name == "ppo":
                return agent._next_values(transitions, torch.zeros(len(transitions)))
            if name == "dqfd":
                return agent._td_loss(transitions.flat())[0]
            if name == "ddpg":
                return agent._critic_loss(transitions.flat())
            return agent._loss(transitions.flat())

    assert not torch.allclose(targets(batch), targets(moved))


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_the_same_state_acts_differently_after_another_history(name):
    no_updates = {**SPECS[name]["update_mode"], "batch_size": 50}
    agent = build(name, "float" if name == "ppo" else "int", update_mode=no_updates)
    shared = STATES[2, 0]
    outcomes = []
    for first in (STATES[0, 0], STATES[1, 0]):
        agent.reset()
        agent.act(first)
        agent.observe(terminal=0, reward=0.0)
        action = agent.act(shared, deterministic=True)
        agent.observe(terminal=0, reward=0.0)
        outcomes.append((np.asarray(action), agent.episodes.internals[LSTM].clone()))
    assert agent.updates == 0
    (first_action, first_internal), (second_action, second_internal) = outcomes
    assert not torch.equal(first_internal, second_internal)
    if name == "ppo":  # a float action (the Gaussian's mean) shows the difference too
        assert first_action != second_action


@pytest.mark.parametrize("name", ["ppo", "dqn"])
@pytest.mark.parametrize("rows", [1, 2])
def test_reset_starts_every_row_from_zeros(name, rows):
    agent = build(name)
    for t in range(3):
        agent.act(STATES[t, :rows])
        agent.observe(terminal=np.zeros(rows, dtype=np.int8), reward=np.zeros(rows))
    assert agent.episodes.internals[LSTM].abs().sum() > 0
    agent.reset()
    agent.act(STATES[3, :rows])
    assert torch.equal(agent.episodes.internals[LSTM], lstm_step(agent, STATES[3, :rows], zeros(rows)))


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_a_terminal_in_one_row_restarts_only_that_row(name):
    agent = build(name)
    internal = zeros(2)
    for t in range(12):
        if t == 5:  # row 0 ended at step 4 (row 1 goes on until step 5): only row 0 starts from zeros
            assert not internal[0].any() and internal[1].all()
        agent.act(STATES[t])
        expected = lstm_step(agent, STATES[t], internal)
        assert torch.equal(agent.episodes.internals[LSTM], expected), f"step {t}"
        terminal = np.array([(t + 1) % 5 == 0, (t + 1) % 3 == 0], dtype=np.int8)  # row 0: steps 4, 9; row 1: 2, 5...
        agent.observe(terminal=terminal, reward=np.zeros(2))
        internal = expected.clone()
        internal[torch.from_numpy(terminal != 0)] = 0.0
    assert agent.episode == 2 + 4


# ---------------------------------------------------------------------------------------------- checkpoints


def assert_parameters_equal(a, b) -> None:
    pa, pb = a.get_parameters(), b.get_parameters()
    assert set(pa) == set(pb)
    for name in pa:
        assert torch.equal(pa[name], pb[name]), f"parameter {name} differs"


@pytest.mark.parametrize(("name", "action_type"), [("ppo", "float"), ("ppo", "int"), ("dqn", "int")])
def test_checkpoint_mid_episode_continues_the_recurrent_state(name, action_type, tmp_path):
    agent = build(name, action_type)
    drive(agent, 0, 23)  # step 23 is the fourth of its episode: the LSTM state is three steps in
    saved_updates = agent.updates
    assert saved_updates > 0
    saved_internal = agent.episodes.internals[LSTM].clone()
    assert saved_internal.abs().sum() > 0
    agent.save_model(tmp_path)
    expected_actions = [step(agent, t, deterministic=True) for t in (23, 24)]  # the rest of the episode
    drive(agent, 25, 45)
    assert agent.updates > saved_updates

    restored = build(name, action_type)
    restored.restore_model(tmp_path)
    assert torch.equal(restored.episodes.internals[LSTM], saved_internal)
    actions = [step(restored, t, deterministic=True) for t in (23, 24)]
    np.testing.assert_array_equal(actions, expected_actions)
    drive(restored, 25, 45)
    assert (restored.timestep, restored.episode, restored.updates) == (agent.timestep, agent.episode, agent.updates)
    assert torch.equal(restored.episodes.internals[LSTM], agent.episodes.internals[LSTM])
    assert_parameters_equal(agent, restored)

    if action_type == "float":  # the restored state matters: from zeros the same network acts otherwise
        fresh = build(name, action_type)
        fresh.restore_model(tmp_path)
        fresh.start_independent_episode()
        assert fresh.act(STATES[23, 0], deterministic=True, independent=True) != expected_actions[0]


# ---------------------------------------------------------------------------------------------- import_experience

# two episodes: three steps ending in a terminal, then two steps of one that was not over when it was recorded
EXPERIENCE = [
    {"states": [0.5], "actions": 1, "terminal": 0, "reward": 1.0},
    {"states": [-0.25], "actions": 0, "terminal": False, "reward": 0.5},
    {"states": [0.75], "actions": 1, "terminal": True, "reward": -1.0},
    {"states": [-1.0], "actions": 0, "terminal": 0, "reward": 2.0},
    {"states": [0.125], "actions": 1, "terminal": 0, "reward": 0.0},
]
EXPECTED = {
    "states/state": np.array([[0.5], [-0.25], [0.75], [-1.0], [0.125]], dtype=np.float32),
    # the following state within the episode; a step that ends one, and the open last step, stand in their own
    "next_states/state": np.array([[-0.25], [0.75], [0.75], [0.125], [0.125]], dtype=np.float32),
    "actions/action": np.array([1, 0, 1, 0, 1], dtype=np.int64),
    "reward": np.array([1.0, 0.5, -1.0, 2.0, 0.0], dtype=np.float32),
    "terminal": np.array([0, 0, 1, 0, 2], dtype=np.int8),  # the open end is stored as a truncation
}
MLP_SPECS = {
    "dqn": {
        "type": "dqn",
        "network": [{"type": "dense", "size": 4}],
        "memory": {"type": "replay", "capacity": 16},
        "update_mode": {"batch_size": 8},
    },
    "ppo": {"type": "ppo", "network": [{"type": "dense", "size": 4}]},
}
FORMS = {
    "list of dicts": EXPERIENCE,
    "dict of lists": {key: [step[key] for step in EXPERIENCE] for key in EXPERIENCE[0]},
    "dict of arrays": {
        "states": np.array([step["states"] for step in EXPERIENCE], dtype=np.float32),
        "actions": np.array([step["actions"] for step in EXPERIENCE]),
        "terminal": np.array([int(step["terminal"]) for step in EXPERIENCE]),
        "reward": np.array([step["reward"] for step in EXPERIENCE]),
    },
}


def stored(agent) -> dict[str, np.ndarray]:
    """The memory's rows, oldest first (nothing has wrapped around in these tests)."""
    contents = agent.memory.contents()
    assert contents.pop("indices").tolist() == list(range(len(agent.memory)))
    return contents


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize(("name", "memory"), [("dqn", "Replay"), ("ppo", "Latest")])
def test_import_experience_writes_exact_rows(name, memory, form):
    env = make("minimal", action_type="int")
    agent = create_agent(MLP_SPECS[name], states=env.states, actions=env.actions)
    assert type(agent.memory).__name__ == memory
    agent.import_experience(FORMS[form])
    rows = stored(agent)
    assert set(rows) == set(EXPECTED)
    for field, expected in EXPECTED.items():
        assert rows[field].dtype == expected.dtype, field
        np.testing.assert_array_equal(rows[field], expected, err_msg=field)
    assert agent.memory.num_episodes == 2  # the truncated tail counts as an episode
    assert (agent.timestep, agent.episode, agent.updates) == (0, 0, 0)  # importing is not acting


def test_import_experience_appends_after_what_is_stored():
    env = make("minimal", action_type="int")
    agent = create_agent(MLP_SPECS["dqn"], states=env.states, actions=env.actions)
    agent.import_experience(EXPERIENCE[:3])
    agent.import_experience(EXPERIENCE[3:])
    for field, expected in EXPECTED.items():
        np.testing.assert_array_equal(stored(agent)[field], expected, err_msg=field)
    agent.import_experience([])  # nothing to import: nothing changes
    agent.import_experience({"states": [], "actions": [], "terminal": [], "reward": []})
    assert len(agent.memory) == len(EXPERIENCE)


def test_imported_steps_cut_short_say_that_they_bootstrap_from_a_stand_in(recwarn):
    """A recording has no state after a truncation nor after its unfinished last step: as observe() without
    next_states, the import says that each one's own state stands in for it; whole episodes import silently."""
    env = make("minimal", action_type="int")
    agent = create_agent(MLP_SPECS["dqn"], states=env.states, actions=env.actions)
    whole = [{**step, "terminal": step["terminal"] or index == 2} for index, step in enumerate(EXPERIENCE[:3])]
    agent.import_experience(whole)
    assert not [w for w in recwarn if "imported experience" in str(w.message)]
    cut = [{**step, "terminal": 2 if index == 1 else step["terminal"]} for index, step in enumerate(EXPERIENCE[:4])]
    with pytest.warns(
        UserWarning, match=r"2 steps end with terminal 2 \(1 time-limit truncation and the last step"
    ) as caught:
        agent.import_experience(cut)
    assert caught[0].filename == __file__  # it points at the call
    with pytest.warns(UserWarning, match=r"1 step ends with terminal 2 \(1 time-limit truncation\)"):
        agent.import_experience([{**EXPERIENCE[0], "terminal": 2}])


def test_import_experience_with_recurrent_internals():
    agent = build("dqn")
    internal = np.arange(16, dtype=np.float32).reshape(2, 8) / 16
    experience = [dict(EXPERIENCE[0], internals={LSTM: internal}), EXPERIENCE[1]]
    agent.import_experience(experience)
    rows = stored(agent)
    np.testing.assert_array_equal(rows[f"internals/{LSTM}"], np.stack([internal, np.zeros((2, 8), np.float32)]))
    np.testing.assert_array_equal(rows["terminal"], [0, 2])
    # the next internals: the following step's within the episode; the open last step stands in its own
    np.testing.assert_array_equal(rows[f"next_internals/{LSTM}"], np.zeros((2, 2, 8), np.float32))


def test_imported_steps_get_the_next_steps_internals_within_their_episode():
    agent = build("dqn")
    internals = [np.full((2, 8), k + 1, dtype=np.float32) for k in range(len(EXPERIENCE))]
    agent.import_experience(
        [dict(step, internals={LSTM: value}) for step, value in zip(EXPERIENCE, internals, strict=True)]
    )
    following = stored(agent)[f"next_internals/{LSTM}"][:, 0, 0]
    assert following.tolist() == [2, 3, 3, 5, 5]  # terminal after the third step; the fifth is the open end


@pytest.mark.parametrize("spec", [{"type": "random"}, {"type": "constant", "action_values": 1}])
def test_import_experience_into_an_agent_that_does_not_learn(spec):
    env = make("minimal", action_type="int")
    agent = create_agent(spec, states=env.states, actions=env.actions)
    with pytest.raises(RuntimeError, match=f"^{spec['type']} agents have no memory to import experience into$"):
        agent.import_experience(EXPERIENCE)


def without(step: dict, key: str) -> dict:
    return {k: v for k, v in step.items() if k != key}


STEP = EXPERIENCE[0]


@pytest.mark.parametrize(
    ("experience", "text"),
    [
        (
            [STEP, dict(STEP, actions=7)],  # once stored as it was
            "experiences[1].actions: out of range; expected an integer in [0, 1], got 7.",
        ),
        (
            [STEP, dict(STEP, actions=0.5)],
            "experiences[1].actions: not an integer; expected an integer in [0, 1], got 0.5.",
        ),
        (
            [dict(STEP, actions=True)],
            "experiences[0].actions: not an integer; expected an integer in [0, 1], got true.",
        ),
        (
            [STEP, dict(STEP, terminal=5)],  # observe rejects it; so does the import now
            "experiences[1].terminal: not a terminal; expected 0/false, 1/true or 2 (truncated), got 5.",
        ),
        (
            [STEP, dict(STEP, terminal="yes")],
            'experiences[1].terminal: not a terminal; expected 0/false, 1/true or 2 (truncated), got "yes".',
        ),
        (
            [STEP, without(STEP, "reward")],  # once a bare KeyError
            "experiences[1]: step 1 needs 'reward'; got a step with keys states, actions, terminal.",
        ),
        ([dict(STEP, reward=float("nan"))], "experiences[0].reward: not a reward; expected a finite number, got NaN."),
        ([dict(STEP, reward="1")], 'experiences[0].reward: not a reward; expected a finite number, got "1".'),
        ([dict(STEP, rewards=1.0)], "experiences[0].rewards: unknown key for a step.\n  Did you mean 'reward'?"),
        (
            [STEP, 3],
            'experiences[1]: not a step; expected a dict like {"states": ..., "actions": ..., "terminal": 0, '
            '"reward": 1.0}, got 3.',
        ),
        (
            3,
            'experiences: not a list of steps or a dict of lists; expected a list of dicts like {"states": ..., '
            '"actions": ..., "terminal": 0, "reward": 1.0}, got 3.',
        ),
        (
            [dict(STEP, states=[0.1, 0.2])],
            "experiences[0].states: not a state of this agent: state has shape (2,), expected (1,) or (batch, *(1,)).",
        ),
        (
            [dict(STEP, states=[[0.1], [0.2]])],
            "experiences[0].states: holds a batch of states; a step has one state; got 2 rows.",
        ),
        (
            [dict(STEP, internals={"lstm": np.zeros(2)})],
            "experiences[0].internals.lstm: unknown internal.\n  Known: none (the network is not recurrent).",
        ),
        (
            {"states": [[0.5]], "actions": [1], "terminal": [0]},
            "experiences: needs 'reward'; expected a dict of lists with states, actions, terminal, reward, got a dict "
            "with keys states, actions, terminal.",
        ),
        (
            {"states": [[0.5]], "actions": [1], "terminal": [0], "reward": [1.0, 2.0]},
            "experiences.states: has 1 step and 'reward' has 2.",
        ),
        (
            {"states": np.zeros((2, 1)), "actions": np.array([1, 3]), "terminal": [0, 1], "reward": [0.0, 1.0]},
            "experiences.actions[1]: out of range; expected an integer in [0, 1], got 3.",
        ),
    ],
)
def test_import_experience_checks_every_step(experience, text):
    env = make("minimal", action_type="int")
    agent = create_agent(MLP_SPECS["dqn"], states=env.states, actions=env.actions)
    with pytest.raises(SpecError) as caught:
        agent.import_experience(experience)
    assert str(caught.value) == text
    assert len(agent.memory) == 0  # nothing of a bad import is stored


@pytest.mark.parametrize(
    ("action_type", "value", "text"),
    [
        ("bounded", 1.5, "experiences[1].actions: out of range; expected a number in [-1.0, 1.0], got 1.5."),
        ("float", float("inf"), "experiences[1].actions: not a finite number; expected a finite number, got Infinity."),
        ("bool", 1, "experiences[1].actions: not a boolean; expected true or false, got 1."),
    ],
)
def test_import_experience_checks_float_and_bool_actions(action_type, value, text):
    env = make("minimal", action_type=action_type)
    agent = create_agent(MLP_SPECS["ppo"], states=env.states, actions=env.actions)
    good = True if action_type == "bool" else 0.5
    with pytest.raises(SpecError) as caught:
        agent.import_experience([dict(STEP, actions=good), dict(STEP, actions=value)])
    assert str(caught.value) == text


def test_import_experience_names_a_missing_action_of_named_actions():
    env = make("multi")
    agent = create_agent(MLP_SPECS["ppo"], states={"float": env.states["float"]}, actions=env.actions)
    states = {"float": np.zeros(2)}
    step = {"states": states, "actions": {"int": 0, "bool": True, "float": 0.0}, "terminal": 0, "reward": 0.0}
    with pytest.raises(SpecError) as caught:
        agent.import_experience([step])
    assert str(caught.value) == (
        'experiences[0].actions: needs a value for action \'bounded\'; got {"int": 0, "bool": true, "float": 0.0}.'
    )


def test_import_experience_larger_than_the_memory():
    env = make("minimal", action_type="int")
    agent = create_agent(MLP_SPECS["dqn"], states=env.states, actions=env.actions)  # capacity 16
    with pytest.raises(SpecError) as caught:
        agent.import_experience(EXPERIENCE * 4)
    assert (
        str(caught.value)
        == "experiences: 20 steps do not fit in the memory at once.\n  Import at most memory.capacity (16) steps."
    )


def test_import_experience_runs_a_sequence_preprocessor_episode_by_episode():
    """Frames stack within each episode, from its start, as acting would stack them; the agent's own preprocessor
    (mid-episode here) is left as it was."""
    env = make("minimal", action_type="int")
    spec = {**MLP_SPECS["dqn"], "states_preprocessing": {"type": "sequence", "length": 3}}
    agent = create_agent(spec, states=env.states, actions=env.actions)
    agent.act([0.3])
    agent.observe(terminal=0, reward=1.0)
    live = agent.preprocessing["state"].state_dict()
    agent.import_experience(EXPERIENCE)
    rows = stored(agent)
    a, b, c, d, e = (step["states"][0] for step in EXPERIENCE)  # episodes a b c | d e
    np.testing.assert_array_equal(
        rows["states/state"], np.array([[a, a, a], [a, a, b], [a, b, c], [d, d, d], [d, d, e]], dtype=np.float32)
    )
    np.testing.assert_array_equal(
        rows["next_states/state"],
        np.array([[a, a, b], [a, b, c], [a, b, c], [d, d, e], [d, d, e]], dtype=np.float32),
    )
    np.testing.assert_array_equal(rows["terminal"], [0, 0, 1, 0, 2])
    after = agent.preprocessing["state"].state_dict()
    for key, value in live["0"].items():
        np.testing.assert_array_equal(after["0"][key], value, err_msg=key)
