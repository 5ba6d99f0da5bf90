"""The ``minimal_test`` environment: TensorForce 0.4's MinimalTest rules (two-dimensional states starting at (1, 0),
reward 1 for the right action, episodes ending with probability 0.25 per step)."""

import numpy as np
import pytest

from torchforce.environments import ENVIRONMENTS, Environment, MinimalTest, make
from torchforce.spec import SpecError


def test_registered_under_its_0_4_names():
    assert ENVIRONMENTS.canonical("minimal_test") == "minimal_test"
    assert ENVIRONMENTS.canonical("MinimalTest") == "minimal_test"
    environment = make({"type": "minimal_test", "specification": {"bool": []}})
    assert isinstance(environment, MinimalTest)
    assert environment.specification == {"bool": ()}
    assert isinstance(Environment.from_spec("minimal_test"), MinimalTest)  # one int action by default


def test_single_kind_uses_the_short_forms():
    assert MinimalTest({"bool": ()}).actions == {"type": "bool", "shape": ()}
    assert MinimalTest({"int": ()}).actions == {"type": "int", "shape": (), "num_actions": 2}
    assert MinimalTest({"float": ()}).actions == {"type": "float", "shape": ()}
    assert MinimalTest("bounded").actions == {"type": "float", "shape": (), "min_value": -0.5, "max_value": 1.5}
    environment = MinimalTest({"int": ()})
    assert environment.states == {"type": "float", "shape": (2,)}
    state = environment.reset()
    assert state.dtype == np.float32 and state.tolist() == [1.0, 0.0]


def test_several_kinds_use_dicts_keyed_by_kind():
    environment = MinimalTest({"bool": (), "int": (2,), "float": (1, 1), "bounded": 1})
    assert environment.states == {
        kind: {"type": "float", "shape": (2,)} for kind in ("bool", "int", "float", "bounded")
    }
    assert environment.actions == {
        "bool": {"type": "bool", "shape": ()},
        "int": {"type": "int", "shape": (2,), "num_actions": 2},
        "float": {"type": "float", "shape": (1, 1)},
        "bounded": {"type": "float", "shape": (1,), "min_value": -0.5, "max_value": 1.5},
    }
    assert {kind: state.tolist() for kind, state in environment.reset().items()} == {
        kind: [1.0, 0.0] for kind in ("bool", "int", "float", "bounded")
    }


@pytest.mark.parametrize("kind, right, wrong", [("bool", True, False), ("int", 1, 0)])
def test_discrete_reward_is_one_for_the_right_action_only(kind, right, wrong):
    environment = MinimalTest({kind: ()}, seed=0)
    environment.reset()
    state, _, reward = environment.execute(right)
    assert reward == 1.0 and state.tolist() == [0.0, 1.0]
    state, _, reward = environment.execute(wrong)
    assert reward == 0.0 and state.tolist() == [1.0, 0.0]


def test_discrete_shaped_action_earns_its_fraction_of_right_elements():
    environment = MinimalTest({"int": (4,)}, seed=0)
    environment.reset()
    state, _, reward = environment.execute(np.array([1, 0, 1, 1]))
    assert reward == 0.75 and state.tolist() == [0.25, 0.75]


def test_float_action_moves_the_state_and_is_clipped_at_the_ends():
    environment = MinimalTest({"float": ()}, seed=0)
    environment.reset()
    state, _, reward = environment.execute(0.25)
    assert state.tolist() == [0.75, 0.25] and reward == 0.25
    state, _, reward = environment.execute(2.0)  # x floors at 0, y caps at 1
    assert state.tolist() == [0.0, 1.0] and reward == 1.0
    state, _, reward = environment.execute(0.0)  # staying put keeps the reward
    assert reward == 1.0
    state, _, reward = environment.execute(-1.5)  # y may go below 0; the reward may not
    assert state.tolist() == [1.5, -0.5] and reward == 0.0


def test_float_shaped_action_moves_by_its_mean():
    environment = MinimalTest({"bounded": (2,)}, seed=0)
    environment.reset()
    state, _, reward = environment.execute(np.array([1.0, 0.0]))
    assert state.tolist() == [0.5, 0.5] and reward == 0.5


def test_several_kinds_reward_is_the_mean():
    environment = MinimalTest({"bool": (), "float": ()}, seed=0)
    environment.reset()
    states, _, reward = environment.execute({"bool": True, "float": 0.5})
    assert reward == 0.75
    assert states["bool"].tolist() == [0.0, 1.0] and states["float"].tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="expected a dict with actions"):
        environment.execute({"bool": True})


def test_episodes_end_at_random_with_probability_one_quarter():
    environment = MinimalTest({"bool": ()}, seed=3)
    environment.reset()
    terminals = [environment.execute(True)[1] for _ in range(20_000)]
    assert set(terminals) == {0, 1}
    assert np.mean(terminals) == pytest.approx(0.25, abs=0.01)


def test_seed_makes_episode_ends_reproducible():
    def ends(seed):
        environment = MinimalTest({"int": ()})
        environment.seed(seed)
        environment.reset()
        return [environment.execute(1)[1] for _ in range(50)]

    assert ends(7) == ends(7)
    assert ends(7) != ends(8)


def test_reset_restores_the_start_state():
    environment = MinimalTest({"float": ()}, seed=0)
    environment.reset()
    environment.execute(1.0)
    assert environment.reset().tolist() == [1.0, 0.0]


@pytest.mark.parametrize(
    "specification, message",
    [
        ({"integer": ()}, "integer"),
        ({"bounded-float": ()}, "bounded-float"),
        ({}, "not a dict of action kinds"),
        ([("bool", ())], "not a dict of action kinds"),
        ({"int": (0,)}, "not an action shape"),
        ({"int": "2"}, "not an action shape"),
    ],
)
def test_bad_specifications_are_spec_errors(specification, message):
    with pytest.raises(SpecError, match=message):
        MinimalTest(specification)
