"""Environment.from_spec in all its forms, the registry, and the built-in test environments' optimal returns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from torchforce.environments import ENVIRONMENTS, Environment, Gym, Minimal, MultiState, make
from torchforce.spec import SpecError, normalize_actions, normalize_states


class Constant(Environment):
    """A user environment, built by import path."""

    def __init__(self, *, value: float = 1.0) -> None:
        self.value = value

    @property
    def states(self):
        return {"shape": (), "type": "float"}

    @property
    def actions(self):
        return {"type": "bool"}

    def reset(self):
        return np.float32(self.value)

    def execute(self, actions):
        return np.float32(self.value), 1, 0.0


# ------------------------------------------------------------------------------------------------------- from_spec


def test_registry_names_and_aliases():
    assert ENVIRONMENTS.names() == ["atari", "gym", "minimal", "minimal_test", "multi", "repeat_actions"]
    for alias in ("gymnasium", "openai_gym", "OpenAIGym", "tensorforce.contrib.openai_gym.OpenAIGym"):
        assert ENVIRONMENTS.canonical(alias) == "gym"
    assert ENVIRONMENTS.canonical("multi_state") == "multi"
    assert ENVIRONMENTS.canonical("MinimalTest") == "minimal_test"  # 0.4's test environment


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "gym", "gym_id": "CartPole-v1"},
        {"type": "openai_gym", "gym_id": "CartPole-v1"},
        {"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "CartPole-v1"},
        {"type": "CartPole-v1"},
        "CartPole-v1",
    ],
)
def test_gym_specs(spec):
    env = Environment.from_spec(spec)
    assert isinstance(env, Gym) and env.gym_id == "CartPole-v1"


def test_kwargs_are_added_to_the_spec_and_override_it():
    env = Environment.from_spec({"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 3}, {"seed": 1})
    env.reset()
    assert [env.execute(0)[1] for _ in range(3)] == [0, 0, 2]
    env = Environment.from_spec("minimal", {"action_type": "bool", "episode_length": 2})
    assert env.actions["type"] == "bool" and env.episode_length == 2
    env = make("CartPole-v1", max_episode_timesteps=2)
    env.reset()
    assert [env.execute(0)[1] for _ in range(2)] == [0, 2]


def test_json_and_yaml_files(tmp_path):
    file = tmp_path / "openai_cartpole.json"
    file.write_text(json.dumps({"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "CartPole-v1"}))
    assert isinstance(Environment.from_spec(str(file)), Gym)
    file = tmp_path / "minimal.yaml"
    file.write_text("type: minimal\naction_type: float\n")
    assert Environment.from_spec(file).actions == {"type": "float", "shape": ()}
    file = tmp_path / "bad.json"
    file.write_text(json.dumps({"type": "minimal", "action_typ": "int"}))
    with pytest.raises(SpecError, match="environment.action_typ: unknown argument") as error:
        Environment.from_spec(str(file))
    assert "bad.json" in str(error.value) and "Did you mean 'action_type'?" in str(error.value)


def test_import_paths_classes_and_instances():
    env = Environment.from_spec({"type": f"{__name__}:Constant", "value": 2.0})
    assert isinstance(env, Constant) and env.value == 2.0
    assert Environment.from_spec(Constant, {"value": 3.0}).value == 3.0
    instance = Constant()
    assert Environment.from_spec(instance) is instance
    with pytest.raises(SpecError, match="environment.valu: unknown argument"):
        Environment.from_spec(Constant, {"valu": 3.0})
    with pytest.raises(SpecError, match="kwargs cannot be applied"):
        Environment.from_spec(instance, {"value": 1.0})


def test_unknown_names_are_spec_errors_with_suggestions():
    with pytest.raises(SpecError, match='unknown environment "minimall"') as error:
        Environment.from_spec("minimall")
    assert "Did you mean 'minimal'?" in str(error.value)
    with pytest.raises(SpecError, match="unknown Gymnasium id 'CartPole-v9'"):
        Environment.from_spec("CartPole-v9")
    with pytest.raises(SpecError, match="environment: a Gym environment needs 'gym_id'"):
        Environment.from_spec({"type": "openai_gym", "max_episode_timesteps": 10})
    with pytest.raises(SpecError, match="environment.action_type: unknown value"):
        Environment.from_spec({"type": "minimal", "action_type": "integer"})


def test_environment_base_class_defaults():
    env = Constant()
    assert str(env) == "Constant" and env.seed(3) is None
    with env:
        pass
    with pytest.raises(NotImplementedError):
        Environment().reset()


# -------------------------------------------------------------------------------------------- built-in environments


def optimal_minimal(kind: str, state: np.ndarray):
    x = float(state[0])
    return {"int": int(x > 0), "bool": x > 0, "float": x, "bounded": x}[kind]


def episode_return(env: Environment, policy) -> tuple[float, int]:
    state, total = env.reset(), 0.0
    for step in range(1, 1000):
        state, terminal, reward = env.execute(policy(state))
        total += reward
        if terminal:
            assert terminal == 1
            return total, step
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize("kind", ["int", "bool", "float", "bounded"])
def test_minimal_optimal_return(kind):
    env = Minimal(kind, seed=0)
    normalize_states(env.states)
    normalize_actions(env.actions)
    assert episode_return(env, lambda state: optimal_minimal(kind, state)) == (10.0, 10)
    wrong = {"int": lambda s: 1 - optimal_minimal(kind, s), "bool": lambda s: not optimal_minimal(kind, s)}
    worst = wrong.get(kind, lambda s: optimal_minimal(kind, s) + 1.5)
    assert episode_return(env, worst) == (0.0, 10)
    assert episode_return(Minimal(kind, episode_length=3, seed=1), lambda s: optimal_minimal(kind, s)) == (3.0, 3)


def test_minimal_specs():
    assert Minimal("int").actions == {"type": "int", "shape": (), "num_actions": 2}
    assert Minimal("float").actions == {"type": "float", "shape": ()}
    assert Minimal("bounded").actions == {"type": "float", "shape": (), "min_value": -1.0, "max_value": 1.0}
    state = Minimal().reset()
    assert state.shape == (1,) and state.dtype == np.float32 and -1 <= state[0] <= 1


def test_minimal_seeding():
    a, b = Minimal(seed=5), Minimal(seed=5)
    assert [float(a.reset()[0]) for _ in range(5)] == [float(b.reset()[0]) for _ in range(5)]
    a.seed(9)
    b.seed(9)
    np.testing.assert_array_equal(a.reset(), b.reset())
    assert Minimal(seed=1).reset()[0] != Minimal(seed=2).reset()[0]


def optimal_multi(state: dict) -> dict:
    return {
        "int": int(state["int"]),
        "bool": bool(state["bool"]),
        "float": float(state["float"][0]),
        "bounded": float(state["float"][1]),
    }


def test_multi_state_optimal_return_and_specs():
    env = Environment.from_spec("multi_state", {"seed": 0})
    assert isinstance(env, MultiState)
    states, single = normalize_states(env.states)
    assert not single and set(states) == {"bool", "float", "int"}
    actions, single = normalize_actions(env.actions)
    assert not single and set(actions) == {"bool", "bounded", "float", "int"}
    state = env.reset()
    assert state["int"].dtype == np.int64 and state["bool"].dtype == np.bool_ and state["float"].dtype == np.float32
    assert episode_return(env, optimal_multi) == (10.0, 10)
    random = np.random.default_rng(0)
    score, _ = episode_return(env, lambda s: {"int": random.integers(3), "bool": True, "float": 5.0, "bounded": 1.0})
    assert score < 10.0


def test_multi_state_subset_of_actions():
    env = MultiState(action_types=["int", "bounded"], episode_length=4, seed=0)
    assert set(env.actions) == {"int", "bounded"}
    assert episode_return(env, optimal_multi) == (4.0, 4)
    with pytest.raises(ValueError, match="expected a dict with actions"):
        env.reset()
        env.execute({"int": 1})
    with pytest.raises(SpecError, match="action_types\\[1\\]: unknown value"):
        MultiState(action_types=["int", "boolean"])


def test_repeat_actions_sums_rewards_and_stops_at_a_terminal():
    from torchforce.environments import make

    environment = make(
        {"type": "repeat_actions", "environment": {"type": "minimal", "episode_length": 5, "seed": 3}, "repeat": 2}
    )
    environment.reset()
    action = 1
    steps = []
    for _ in range(3):
        _, terminal, reward = environment.execute(action)
        steps.append((terminal, reward))
    assert [terminal for terminal, _ in steps] == [0, 0, 1]  # 2 + 2 + 1 inner steps: the last repeat ends early
    inner = make({"type": "minimal", "episode_length": 5, "seed": 3})
    inner.reset()
    rewards = [inner.execute(action)[2] for _ in range(5)]
    assert [reward for _, reward in steps] == [rewards[0] + rewards[1], rewards[2] + rewards[3], rewards[4]]
