"""The Gymnasium space -> states/actions spec mapping (docs/tensorforce-0.4.md, Environments) and the unflattening
of actions on execute."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from torchforce.environments import Gym
from torchforce.spec import normalize_actions, normalize_states


class SpaceEnv(gymnasium.Env):
    """A do-nothing environment with the given spaces; it remembers the last action it received."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.received = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        self.received = action
        return self.observation_space.sample(), 1.0, False, False, {}


def adapter(observation_space: spaces.Space, action_space: spaces.Space | None = None) -> Gym:
    env = Gym(SpaceEnv(observation_space, action_space or spaces.Discrete(2)))
    normalize_states(env.states)  # every produced spec must be valid
    normalize_actions(env.actions)
    return env


def received(env: Gym):
    return env.gym.unwrapped.received


# ---------------------------------------------------------------------------------------------------------- states


def test_box_state_with_uniform_bounds_keeps_them():
    env = adapter(spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64))
    assert env.states == {"type": "float", "shape": (3,), "min_value": -1.0, "max_value": 1.0}
    state = env.reset()
    assert state.dtype == np.float32 and state.shape == (3,)


def test_box_state_with_mixed_bounds_has_none():
    env = adapter(spaces.Box(np.float32([-1.0, -np.inf]), np.float32([1.0, np.inf]), dtype=np.float32))
    assert env.states == {"type": "float", "shape": (2,)}


def test_uint8_image_is_a_float_state_from_0_to_255():
    env = adapter(spaces.Box(0, 255, shape=(8, 6, 3), dtype=np.uint8))
    assert env.states == {"type": "float", "shape": (8, 6, 3), "min_value": 0.0, "max_value": 255.0}
    state = env.reset()
    assert state.dtype == np.float32 and state.shape == (8, 6, 3) and state.max() <= 255


def test_discrete_state_is_int_with_num_values_and_starts_at_zero():
    env = adapter(spaces.Discrete(5, start=10))
    assert env.states == {"type": "int", "shape": (), "num_values": 5}
    for _ in range(10):
        state = env.execute(0)[0]
        assert state.dtype == np.int64 and state.shape == () and 0 <= state < 5


def test_multi_discrete_and_multi_binary_states():
    env = adapter(spaces.MultiDiscrete([3, 4]))
    assert env.states == {"type": "int", "shape": (2,), "num_values": 4}
    env = adapter(spaces.MultiBinary(3))
    assert env.states == {"type": "bool", "shape": (3,)}
    assert env.reset().dtype == np.bool_


def test_tuple_and_dict_states_are_flattened_by_name():
    space = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,))))
    env = adapter(space)
    assert env.states == {
        "state0": {"type": "int", "shape": (), "num_values": 3},
        "state1": {"type": "float", "shape": (2,), "min_value": -1.0, "max_value": 1.0},
    }
    state = env.reset()
    assert set(state) == {"state0", "state1"} and state["state1"].shape == (2,)

    space = spaces.Dict({"position": spaces.Box(-1, 1, (2,)), "flags": spaces.MultiBinary(2)})
    env = adapter(space)
    keys = list(space.spaces)  # the Dict's own order decides the indices
    assert set(env.states) == {f"state{i}-{key}" for i, key in enumerate(keys)}

    nested = spaces.Tuple((spaces.Discrete(2), spaces.Dict({"a": spaces.Discrete(4), "b": spaces.Box(0, 1, (1,))})))
    env = adapter(nested)
    assert set(env.states) == {"state0", "state1-0-a", "state1-1-b"}
    observation = env.gym.unwrapped.observation_space.sample()
    flat = env._read(observation)
    assert flat["state1-0-a"] == observation[1]["a"]
    np.testing.assert_array_equal(flat["state1-1-b"], observation[1]["b"])


def test_unsupported_space_is_a_spec_error():
    from torchforce.spec import SpecError

    with pytest.raises(SpecError, match="unsupported observation space Text"):
        adapter(spaces.Text(5))


# --------------------------------------------------------------------------------------------------------- actions


def test_discrete_action_becomes_the_spaces_own_integer_with_start():
    """The type of the space's own samples (np.int64), whose contains() check is the fast one."""
    env = adapter(spaces.Discrete(2), spaces.Discrete(4, start=-1))
    assert env.actions == {"type": "int", "shape": (), "num_actions": 4}
    env.reset()
    env.execute(3)
    assert received(env) == 2 and type(received(env)) is np.int64
    assert type(received(env)) is type(env.gym.action_space.sample())


def test_uniform_bounded_box_action_is_one_float_action():
    env = adapter(spaces.Discrete(2), spaces.Box(-2.0, 2.0, shape=(2, 3), dtype=np.float32))
    assert env.actions == {"type": "float", "shape": (2, 3), "min_value": -2.0, "max_value": 2.0}
    env.reset()
    env.execute(np.ones((2, 3)))
    assert received(env).dtype == np.float32 and received(env).shape == (2, 3)


def test_integer_box_actions_round_to_the_nearest_value():
    # a cast would cut toward 0: -1.7 to -1 and 1.9 to 1, and 0's bin twice as wide as the others
    env = adapter(spaces.Discrete(2), spaces.Box(-2, 2, shape=(3,), dtype=np.int64))
    assert env.actions == {"type": "float", "shape": (3,), "min_value": -2.0, "max_value": 2.0}
    env.reset()
    env.execute(np.array([-1.7, 1.9, 0.4]))
    assert received(env).dtype == np.int64 and received(env).tolist() == [-2, 2, 0]
    low, high = np.array([0, -3]), np.array([4, 3])  # non-uniform bounds: one action per element
    env = adapter(spaces.Discrete(2), spaces.Box(low, high, dtype=np.int32))
    env.reset()
    env.execute({"action0": 3.6, "action1": -2.5})
    assert received(env).dtype == np.int32 and received(env).tolist() == [4, -2]  # -2.5 rounds half to even


def test_unbounded_box_action_has_no_bounds():
    env = adapter(spaces.Discrete(2), spaces.Box(-np.inf, np.inf, shape=(2,)))
    assert env.actions == {"type": "float", "shape": (2,)}


def test_non_uniform_box_action_is_one_action_per_element_and_unflattens():
    low, high = np.float32([[-1.0, 0.0], [-np.inf, 2.0]]), np.float32([[1.0, 5.0], [np.inf, 3.0]])
    env = adapter(spaces.Discrete(2), spaces.Box(low, high, dtype=np.float32))
    assert env.actions == {
        "action0": {"type": "float", "shape": (), "min_value": -1.0, "max_value": 1.0},
        "action1": {"type": "float", "shape": (), "min_value": 0.0, "max_value": 5.0},
        "action2": {"type": "float", "shape": ()},
        "action3": {"type": "float", "shape": (), "min_value": 2.0, "max_value": 3.0},
    }
    env.reset()
    env.execute({"action0": 0.5, "action1": np.float32(4.0), "action2": -7.0, "action3": 2.5})
    np.testing.assert_array_equal(received(env), np.array([[0.5, 4.0], [-7.0, 2.5]], dtype=np.float32))
    assert received(env).dtype == np.float32


def test_multi_binary_action_is_bool():
    env = adapter(spaces.Discrete(2), spaces.MultiBinary(3))
    assert env.actions == {"type": "bool", "shape": (3,)}
    env.reset()
    env.execute(np.array([True, False, True]))
    np.testing.assert_array_equal(received(env), [1, 0, 1])
    assert received(env).dtype == np.int8


def test_multi_discrete_action_uniform_and_not():
    env = adapter(spaces.Discrete(2), spaces.MultiDiscrete([4, 4, 4]))
    assert env.actions == {"type": "int", "shape": (3,), "num_actions": 4}
    env.reset()
    env.execute(np.array([0, 3, 1]))
    np.testing.assert_array_equal(received(env), [0, 3, 1])

    env = adapter(spaces.Discrete(2), spaces.MultiDiscrete([2, 5], start=[1, -2]))
    assert env.actions == {
        "action0": {"type": "int", "shape": (), "num_actions": 2},
        "action1": {"type": "int", "shape": (), "num_actions": 5},
    }
    env.reset()
    env.execute({"action0": 1, "action1": 4})
    np.testing.assert_array_equal(received(env), [2, 2])
    assert received(env) in env.gym.action_space


def test_tuple_and_dict_actions_unflatten_into_the_nested_structure():
    space = spaces.Tuple(
        (
            spaces.Discrete(3),
            spaces.Dict(
                {"jump": spaces.MultiBinary(1), "move": spaces.Box(np.float32([-1.0, 0.0]), np.float32([1.0, 2.0]))}
            ),
        )
    )
    env = adapter(spaces.Discrete(2), space)
    assert env.actions == {
        "action0": {"type": "int", "shape": (), "num_actions": 3},
        "action1-0-jump": {"type": "bool", "shape": (1,)},
        "action1-1-move-0": {"type": "float", "shape": (), "min_value": -1.0, "max_value": 1.0},
        "action1-1-move-1": {"type": "float", "shape": (), "min_value": 0.0, "max_value": 2.0},
    }
    env.reset()
    env.execute({"action0": 2, "action1-0-jump": [True], "action1-1-move-0": -0.5, "action1-1-move-1": 1.5})
    action = received(env)
    assert action[0] == 2 and isinstance(action[1], dict)
    np.testing.assert_array_equal(action[1]["jump"], [1])
    np.testing.assert_array_equal(action[1]["move"], np.array([-0.5, 1.5], dtype=np.float32))
    assert action in space


def test_missing_action_name_is_a_clear_error():
    env = adapter(spaces.Discrete(2), spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))))
    env.reset()
    with pytest.raises(ValueError, match="expected a dict keyed by action name.*action1"):
        env.execute({"action0": 1})
