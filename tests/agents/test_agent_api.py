"""The Agent API (docs/tensorforce-0.4.md, Agent API) on small built-in environments: act/observe forms, batches,
counters, errors, and the
memory's capacity against what the update_mode needs."""

import numpy as np
import pytest
import torch

from torchforce.agents import Agent, create_agent
from torchforce.environments import make
from torchforce.spec import SpecError, SpecWarning

MLP = [{"type": "dense", "size": 16}, {"type": "dense", "size": 16}]
PPO = {"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes", "batch_size": 2}, "seed": 1}
DQN = {
    "type": "dqn",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
    "memory": {"type": "replay", "capacity": 100},
    "seed": 1,
}


def run_episodes(agent, env, episodes):
    for _ in range(episodes):
        state = env.reset()
        while True:
            action = agent.act(state)
            state, terminal, reward = env.execute(action)
            agent.observe(terminal=terminal, reward=reward)
            if terminal:
                break


@pytest.mark.parametrize("spec", [PPO, DQN, {"type": "random"}, {"type": "constant", "action_values": 1}])
def test_agents_act_and_observe_on_int_actions(spec):
    env = make("minimal", action_type="int")
    agent = create_agent(spec, states=env.states, actions=env.actions)
    run_episodes(agent, env, 4)
    assert agent.episode == 4
    assert agent.timestep == 4 * 10
    if agent.learning:
        assert agent.updates > 0


@pytest.mark.parametrize("action_type", ["int", "bool", "float", "bounded"])
def test_ppo_handles_every_action_type(action_type):
    env = make("minimal", action_type=action_type)
    agent = create_agent(PPO, states=env.states, actions=env.actions)
    run_episodes(agent, env, 3)
    action = agent.act(env.reset(), deterministic=True, independent=True)
    if action_type == "bounded":
        assert -1.0 <= float(action) <= 1.0
    assert agent.updates >= 1


def test_named_states_and_actions_return_dicts():
    env = make("multi")
    network = [
        [
            {"type": "input", "names": "int"},
            {"type": "embedding", "indices": 3, "size": 4},
            {"type": "output", "name": "int_embedding"},
        ],
        [{"type": "input", "names": ["float", "int_embedding"]}, {"type": "dense", "size": 16}],
    ]
    agent = create_agent({**PPO, "network": network}, states=env.states, actions=env.actions)
    action = agent.act(env.reset())
    assert isinstance(action, dict) and set(action) == set(env.actions)
    agent.observe(terminal=False, reward=0.0)
    run_episodes(agent, env, 2)


def test_named_states_are_checked_against_their_specs():
    env = make("multi")
    network = [[{"type": "input", "names": "float"}, {"type": "dense", "size": 4}]]
    agent = create_agent({**PPO, "network": network}, states=env.states, actions=env.actions)
    state = env.reset()
    wrong = dict(state, float=np.zeros(7, dtype=np.float32))
    with pytest.raises(ValueError, match=r"state 'float' has shape \(7,\), expected"):
        agent.act(wrong)
    batched = {name: np.stack([value, value]) for name, value in state.items()}
    mixed = dict(batched, float=state["float"])
    with pytest.raises(ValueError, match="states disagree on batching: 'float'"):
        agent.act(mixed)
    uneven = dict(batched, float=np.stack([state["float"]] * 3))
    with pytest.raises(ValueError, match="states disagree on batching: 'float' has shape \\(3, "):
        agent.act(uneven)
    assert len(agent.act(batched)) == len(env.actions)


def test_floats_for_an_integer_state_are_refused_unless_whole():
    # frames scaled to [0, 1] for a uint8 image were cast to zeros: the agent acted on a blank screen without a word
    actions = {"type": "int", "num_actions": 2}
    image = create_agent("random", states={"type": "uint8", "shape": (2, 2)}, actions=actions)
    frame = np.array([[0, 128], [255, 7]], dtype=np.uint8)
    expected = r"state is float32 with values that uint8 does not hold \(from 0 to 1\); expected uint8 values \(0-255"
    with pytest.raises(ValueError, match=expected):
        image.act(frame.astype(np.float32) / 255, independent=True)
    with pytest.raises(ValueError, match=r"from -1 to 255"):
        image.act(np.array([[-1.0, 0], [255, 7]]), independent=True)
    image.act(frame.astype(np.float32), independent=True)  # whole numbers it holds: cast exactly
    image.act(frame, independent=True)
    named = create_agent("random", states={"count": {"type": "int", "shape": 1}}, actions=actions)
    with pytest.raises(ValueError, match=r"state 'count' is float64 with values that int does not hold"):
        named.act({"count": np.array([0.5])}, independent=True)


def test_the_0_3_5_integer_batched_observe_names_batching_capacity():
    env = make("minimal")
    with pytest.raises(
        SpecError,
        match=r"(?s)agent.batched_observe: is true or false since 0.4; expected true or false, got 1000\."
        r".*now 'batching_capacity': 1000",
    ):
        create_agent({**PPO, "batched_observe": 1000}, states=env.states, actions=env.actions)


def test_stop_asks_the_runner_to_end_the_run():
    from torchforce.execution import Runner

    env = make("minimal", action_type="int")
    agent = create_agent(PPO, states=env.states, actions=env.actions)
    assert not agent.should_stop()
    runner = Runner(agent, env)
    runner.run(num_timesteps=100, step_finished=lambda r: r.timestep != 7 or r.agent.stop() or True)
    assert runner.timestep == 7 and agent.should_stop()
    agent.stop(False)
    runner.run(num_timesteps=5)
    assert runner.timestep == 12


def test_batched_act_keeps_one_episode_per_row():
    env = make("minimal", action_type="int")
    agent = create_agent(PPO, states=env.states, actions=env.actions)
    states = np.stack([env.reset() for _ in range(3)])
    actions = agent.act(states)
    assert actions.shape == (3,)
    agent.observe(terminal=np.array([0, 1, 0]), reward=np.array([1.0, 2.0, 3.0]))
    assert agent.episode == 1 and agent.timestep == 3
    agent.act(states)
    agent.observe(terminal=[1, 0, 2], reward=[0.0, 0.0, 0.0], next_states=states)
    assert agent.episode == 3 and agent.timestep == 6


def test_act_twice_without_observe_is_an_error():
    env = make("minimal")
    agent = create_agent({"type": "random"}, states=env.states, actions=env.actions)
    agent.act(env.reset())
    with pytest.raises(RuntimeError, match="act\\(\\) was called twice without observe"):
        agent.act(env.reset())


def test_observe_without_act_and_wrong_row_count_are_errors():
    env = make("minimal")
    agent = create_agent(PPO, states=env.states, actions=env.actions)
    with pytest.raises(RuntimeError, match="observe\\(\\) was called without a preceding act"):
        agent.observe(terminal=False, reward=0.0)
    agent.act(np.stack([env.reset()] * 2))
    with pytest.raises(ValueError, match="2 rows acted"):
        agent.observe(terminal=False, reward=0.0)


def test_independent_act_changes_nothing():
    env = make("minimal")
    agent = create_agent(PPO, states=env.states, actions=env.actions)
    agent.act(env.reset(), independent=True)
    agent.act(env.reset(), independent=True)
    assert agent.timestep == 0


def test_from_spec_accepts_2018_long_names_and_files(tmp_path):
    env = make("minimal")
    path = tmp_path / "agent.json"
    path.write_text('{"type": "ppo_agent", "update_mode": {"unit": "episodes", "batch_size": 2}}')
    agent = Agent.from_spec(str(path), {"states": env.states, "actions": env.actions, "network": MLP})
    assert agent.name == "ppo"


def test_legacy_key_names_the_new_key(tmp_path):
    env = make("minimal")
    path = tmp_path / "old.json"
    path.write_text('{"type": "dqn_agent", "batch_size": 64}')
    with pytest.raises(SpecError) as error:
        create_agent(str(path), states=env.states, actions=env.actions, network=MLP)
    assert str(error.value).startswith("agent.batch_size: 'batch_size' is the 0.3.5 name; use 'update_mode.batch_size'")
    assert "old.json" in str(error.value)


def test_unknown_agent_type_and_argument_suggest_names():
    env = make("minimal")
    with pytest.raises(SpecError, match="unknown agent \"ppo_agnet\".*Did you mean 'ppo_agent'|Did you mean"):
        create_agent({"type": "ppo_agnet"}, states=env.states, actions=env.actions, network=MLP)
    with pytest.raises(SpecError, match=r"(?s)agent.discout: unknown argument.*Did you mean 'discount'"):
        create_agent({"type": "ppo", "discout": 0.9}, states=env.states, actions=env.actions, network=MLP)


def test_bad_values_name_their_path():
    env = make("minimal")
    with pytest.raises(SpecError, match="update_mode.batch_size: out of range; expected an integer >= 1, got -4"):
        create_agent(
            {"type": "ppo", "update_mode": {"unit": "episodes", "batch_size": -4}},
            states=env.states,
            actions=env.actions,
            network=MLP,
        )
    with pytest.raises(SpecError, match="update_mode.unit"):
        create_agent(
            {"type": "dqn", "update_mode": {"unit": "episodes", "batch_size": 4}},
            states=env.states,
            actions=env.actions,
            network=MLP,
        )
    with pytest.raises(
        SpecError,
        match="actions.action.type: DQN picks actions by argmax over Q-values, so only bool and int actions work",
    ):
        float_env = make("minimal", action_type="float")
        create_agent({"type": "dqn"}, states=float_env.states, actions=float_env.actions, network=MLP)
    with pytest.raises(SpecError, match="agent.network: ppo needs a network"):
        create_agent({"type": "ppo"}, states=env.states, actions=env.actions)


def test_acting_uses_eval_mode_and_updates_use_training_mode():
    env = make("minimal", action_type="int")
    network = [{"type": "dense", "size": 8}, {"type": "dropout", "rate": 0.5}, {"type": "dense", "size": 8}]
    agent = create_agent({**PPO, "network": network}, states=env.states, actions=env.actions)
    state = env.reset()
    probabilities = [agent.act(state, deterministic=True, independent=True) for _ in range(20)]
    assert len(set(np.asarray(probabilities).tolist())) == 1  # no dropout noise while acting
    assert not agent.policy.training
    run_episodes(agent, env, 3)
    assert agent.updates >= 1


def test_independent_episodes_carry_their_own_recurrent_state():
    from torchforce.execution.evaluation import evaluate

    env = make("minimal", action_type="float")
    network = [{"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 8}]
    agent = create_agent({**PPO, "network": network}, states=env.states, actions=env.actions)
    agent.start_independent_episode()
    state = env.reset()
    first = agent.act(state, deterministic=True, independent=True)
    second = agent.act(state, deterministic=True, independent=True)
    assert not np.allclose(first, second)  # the same state, but the LSTM state moved on
    agent.start_independent_episode()
    assert np.allclose(agent.act(state, deterministic=True, independent=True), first)
    assert agent.timestep == 0
    assert len(evaluate(agent, env, episodes=2)) == 2


def test_independent_acting_leaves_the_training_rows_frames_and_noise_alone():
    """Evaluation between training steps (``act(independent=True)``, here on one row and with exploration) reads
    and advances neither the training rows' stacked frames nor their Ornstein-Uhlenbeck noise: it has its own,
    which start over with ``start_independent_episode``."""
    env = make("minimal", action_type="float")
    spec = {
        "type": "ddpg",
        "network": MLP,
        "states_preprocessing": [{"type": "sequence", "length": 3}],
        "actions_exploration": {"type": "ornstein_uhlenbeck", "sigma": 0.3},
        "update_mode": {"unit": "timesteps", "batch_size": 64, "frequency": 1},  # no update in these steps
        "memory": {"type": "replay", "capacity": 100},
        "seed": 2,
    }
    agent = create_agent(spec, states=env.states, actions=env.actions)
    frames, noise = agent.preprocessing["state"], agent.explorations["action"]

    def train(states):
        for state in states:
            agent.act(np.array([[state], [-state]], dtype=np.float32))
            agent.observe(terminal=[False, False], reward=[0.0, 0.0])

    def evaluate_from_the_start(state):
        agent.start_independent_episode()
        return agent.act(np.array([state], dtype=np.float32), deterministic=True, independent=True)

    train([0.1, 0.2, 0.3])
    trained_frames, trained_noise = frames.state_dict(), noise.state_dict()["state"].copy()
    first = evaluate_from_the_start(0.9)
    for state in (-0.5, 0.5, 0.7):  # an evaluation episode that explores
        agent.act(np.array([state], dtype=np.float32), independent=True)
    assert all(np.array_equal(trained_frames["0"][key], frames.state_dict()["0"][key]) for key in ("buffer", "fresh"))
    assert np.array_equal(noise.state_dict()["state"], trained_noise)
    train([0.4, 0.5])  # other frames in the training rows: the evaluation episode's first action is the same
    assert agent.updates == 0 and evaluate_from_the_start(0.9) == first


EXPLORING_DQN = {**DQN, "actions_exploration": {"type": "epsilon_decay", "initial_epsilon": 0.5, "final_epsilon": 0.5}}
DDPG = {
    "type": "ddpg",
    "network": MLP,
    "critic_network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
    "memory": {"type": "replay", "capacity": 100},
    "actions_exploration": {"type": "ornstein_uhlenbeck", "sigma": 0.3},
    "seed": 1,
}


def training_with_evaluations(spec: dict, action_type: str, every: int | None) -> tuple[list, dict]:
    """The actions of 60 seeded training steps, with 5 exploring acts apart after every ``every``-th (None: none),
    and the parameters they end with."""
    env, apart = make("minimal", action_type=action_type, seed=0), make("minimal", action_type=action_type, seed=1)
    agent = create_agent(spec, states=env.states, actions=env.actions)
    actions, state = [], env.reset()
    for step in range(60):
        action = agent.act(state)
        actions.append(np.asarray(action).tolist())
        state, terminal, reward = env.execute(action)
        agent.observe(terminal=terminal, reward=reward)
        if terminal:
            state = env.reset()
        if every is not None and step % every == 0:
            for _ in range(5):  # an evaluation with exploration: epsilon, Gumbel-max samples, noise
                agent.act(apart.reset(), independent=True)
    return actions, {name: value.clone() for name, value in agent.get_parameters().items()}


@pytest.mark.parametrize(
    ("spec", "action_type"),
    [(PPO, "int"), (EXPLORING_DQN, "int"), (DDPG, "float"), ({"type": "random", "seed": 1}, "int")],
    ids=["ppo", "dqn", "ddpg", "random"],
)
def test_evaluating_with_exploration_leaves_a_seeded_runs_training_as_it_is(spec, action_type):
    """Acting apart that draws (exploration, sampling) draws from generators of its own: the training's actions and
    parameters are those of the run that never evaluated, however often it evaluates."""
    alone, parameters = training_with_evaluations(spec, action_type, None)
    for every in (1, 7):
        actions, evaluated = training_with_evaluations(spec, action_type, every)
        assert actions == alone
        assert all(torch.equal(evaluated[name], parameters[name]) for name in parameters)


def test_exploring_acts_apart_are_random_reproducible_and_continue_from_a_checkpoint():
    env = make("minimal", action_type="int")
    agent = create_agent(EXPLORING_DQN, states=env.states, actions=env.actions)
    state = env.reset()
    first = [int(agent.act(state, independent=True)) for _ in range(40)]
    assert len(set(first)) > 1  # epsilon 0.5: they explore
    again = create_agent(EXPLORING_DQN, states=env.states, actions=env.actions)
    assert [int(again.act(state, independent=True)) for _ in range(40)] == first  # from the seed
    saved = agent.state_dict()
    ahead = [int(agent.act(state, independent=True)) for _ in range(40)]
    restored = create_agent(EXPLORING_DQN, states=env.states, actions=env.actions)
    restored.load_state_dict(saved)
    assert [int(restored.act(state, independent=True)) for _ in range(40)] == ahead != first


# ---------------------------------------------------------------------------------------------- memory and update_mode


@pytest.mark.parametrize("memory", ["replay", {"type": "replay"}])
def test_a_bare_memory_name_gets_the_default_capacity(memory):
    env = make("minimal", action_type="int")
    spec = {"type": "dqn", "network": MLP, "update_mode": {"batch_size": 8}, "memory": memory}
    agent = create_agent(spec, states=env.states, actions=env.actions)
    assert type(agent.memory).__name__ == "Replay" and agent.memory.capacity == 8000  # 1000 batches


def test_a_memory_that_fits_episodes_of_only_a_few_steps_warns():
    env = make("minimal", action_type="int")
    spec = {**PPO, "memory": {"type": "latest", "capacity": 50}, "update_mode": {"unit": "episodes", "batch_size": 10}}
    with pytest.warns(UserWarning) as caught:
        create_agent(spec, states=env.states, actions=env.actions)
    assert [str(w.message) for w in caught] == [
        "memory.capacity: 50 timesteps hold the 10 episodes an update reads (update_mode batch_size) only while "
        "they average at most 5 timesteps; with longer episodes every update fails. memory.capacity counts "
        "timesteps, not episodes."
    ]
    assert caught[0].category is SpecWarning and caught[0].filename == __file__  # the line that built the agent


def test_an_on_policy_memory_smaller_than_the_first_update_warns():
    env = make("minimal", action_type="int")
    update_mode = {"unit": "timesteps", "batch_size": 10, "first_update": 100}
    spec = {**PPO, "memory": {"type": "latest", "capacity": 50}, "update_mode": update_mode}
    with pytest.warns(UserWarning) as caught:
        create_agent(spec, states=env.states, actions=env.actions)
    assert [str(w.message) for w in caught] == [
        "memory.capacity: an on-policy agent writes the 100 timesteps of its first update (update_mode "
        "batch_size/first_update, rounded up to frequency 10) to memory at once; with one environment they do not "
        "fit in 50 and that update fails. Raise memory.capacity to 100."
    ]
    assert caught[0].category is SpecWarning and caught[0].filename == __file__


def test_an_episode_longer_than_the_memory_names_the_capacity_when_it_is_stored():
    env = make("minimal", action_type="int", episode_length=12)
    spec = {**PPO, "memory": {"type": "latest", "capacity": 10}, "update_mode": {"unit": "episodes", "batch_size": 1}}
    agent = create_agent(spec, states=env.states, actions=env.actions)  # 10 rows for 1 episode: no warning
    with pytest.raises(SpecError) as caught:
        run_episodes(agent, env, 1)
    assert str(caught.value) == (
        "memory.capacity: cannot store 12 rows at once in a memory of capacity 10.\n"
        "  An on-policy agent stores each finished episode whole (update_mode unit 'episodes'), or everything since "
        "its last update (update_mode.frequency): raise memory.capacity above that."
    )


@pytest.mark.parametrize(
    "spec", [{"type": "random"}, {"type": "dqn", "network": [{"type": "flatten"}, {"type": "dense", "size": 4}]}]
)
def test_a_batch_of_states_of_another_shape_is_refused_whatever_the_agent(spec):
    # (3, 2, 4) holds as many numbers a row as the spec's (4, 2): acted on silently before, transposed
    agent = create_agent(spec, states={"type": "float", "shape": (4, 2)}, actions={"type": "int", "num_actions": 2})
    for independent in (True, False):
        with pytest.raises(
            ValueError, match=r"state has shape \(3, 2, 4\), expected \(4, 2\) or \(batch, \*\(4, 2\)\)"
        ):
            agent.act(np.zeros((3, 2, 4)), independent=independent)
    assert agent.act(np.zeros((3, 4, 2))).shape == (3,)
