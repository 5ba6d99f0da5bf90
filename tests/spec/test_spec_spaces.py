"""States and actions specs (docs/tensorforce-0.4.md, States and actions): the single and named forms, and each
refusal's full message."""

from __future__ import annotations

from typing import Any

import pytest

from torchforce.spec import ActionSpec, SpecError, StateSpec, normalize_actions, normalize_states


def message(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# -- states: accepted ----------------------------------------------------------------------------------------------


def test_single_state() -> None:
    states, single = normalize_states({"shape": 4, "type": "float"})
    assert single is True
    assert states == {"state": StateSpec("state", (4,), "float")}


def test_single_state_defaults_to_float_and_keeps_shapes() -> None:
    assert normalize_states({"shape": [84, 84, 3]}) == ({"state": StateSpec("state", (84, 84, 3), "float")}, True)
    assert normalize_states({"shape": (2, 3)})[0]["state"].shape == (2, 3)
    assert normalize_states({"shape": []})[0]["state"].shape == ()  # a scalar
    assert normalize_states({"shape": 4.0})[0]["state"].shape == (4,)


def test_state_types() -> None:
    states, _ = normalize_states(
        {
            "position": {"shape": 2, "type": "float", "min_value": -1, "max_value": 1},
            "cell": {"shape": (), "type": "int", "num_values": 16},
            "flags": {"shape": 3, "type": "bool"},
            "count": {"shape": 1, "type": "int"},
        }
    )
    assert states == {
        "cell": StateSpec("cell", (), "int", num_values=16),
        "count": StateSpec("count", (1,), "int"),
        "flags": StateSpec("flags", (3,), "bool"),
        "position": StateSpec("position", (2,), "float", min_value=-1.0, max_value=1.0),
    }
    assert list(states) == ["cell", "count", "flags", "position"]  # sorted by name, as in 2018
    assert states["position"].size == 2 and states["cell"].size == 1


def test_named_states_are_sorted() -> None:
    states, single = normalize_states({"b": {"shape": 1}, "a": {"shape": 2}, "C": {"shape": 3}})
    assert single is False
    assert list(states) == ["C", "a", "b"]
    assert [state.name for state in states.values()] == ["C", "a", "b"]


def test_num_states_is_the_2018_name_of_num_values() -> None:
    states, _ = normalize_states({"shape": 1, "type": "int", "num_states": 5})
    assert states["state"].num_values == 5
    assert states["state"].to_dict() == {"type": "int", "shape": [1], "num_values": 5}


def test_a_single_state_named_shape_is_the_named_form() -> None:
    states, single = normalize_states({"shape": {"shape": 4, "type": "float"}})
    assert single is False
    assert states == {"shape": StateSpec("shape", (4,), "float")}
    states, single = normalize_states({"shape": {"shape": 2}, "type": {"shape": 3, "type": "int"}})
    assert single is False and states["type"] == StateSpec("type", (3,), "int")


def test_state_spec_passthrough() -> None:
    ready = StateSpec("camera", (64, 64, 3), "float")
    assert normalize_states(ready) == ({"camera": ready}, True)
    states, single = normalize_states({"b": ready, "a": {"shape": 1}})
    assert single is False
    assert states["b"] == StateSpec("b", (64, 64, 3), "float")  # takes the name it is filed under
    assert list(states) == ["a", "b"]


def test_state_to_dict_round_trips() -> None:
    spec = {"type": "float", "shape": [3], "min_value": 0.0, "max_value": 2.0}
    states, _ = normalize_states(spec)
    assert states["state"].to_dict() == spec
    assert normalize_states(states["state"].to_dict())[0] == states


# -- states: refused -----------------------------------------------------------------------------------------------


EXAMPLE = '{"shape": 4, "type": "float"}'


@pytest.mark.parametrize(("spec", "got"), [([4], "[4]"), ("float", '"float"'), (None, "null"), (4, "4")])
def test_states_not_a_dict(spec: Any, got: str) -> None:
    assert message(normalize_states, spec) == (
        f"states: not a states spec; expected {EXAMPLE} or {{name: {{...}}, ...}}, got {got}."
    )


def test_states_empty() -> None:
    assert message(normalize_states, {}) == f"states: no states given; expected {EXAMPLE} or {{name: {{...}}, ...}}."
    assert message(normalize_states, {}, "environment.states") == (
        f"environment.states: no states given; expected {EXAMPLE} or {{name: {{...}}, ...}}."
    )


def test_state_not_a_dict() -> None:
    assert message(normalize_states, {"a": {"shape": 1}, "b": 3}) == (
        f"states.b: not a state spec; expected a dict like {EXAMPLE}, got 3."
    )


def test_state_needs_shape() -> None:
    assert message(normalize_states, {"type": "float"}) == 'states: a state needs \'shape\'; got {"type": "float"}.'
    assert message(normalize_states, {"camera": {}}) == "states.camera: a state needs 'shape'; got {}."


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        (0, "states.shape: out of range; expected an integer >= 1, got 0."),
        (-1, "states.shape: out of range; expected an integer >= 1, got -1."),
        (2.5, "states.shape: not an integer; expected an integer >= 1, got 2.5."),
        (True, "states.shape: not a shape; expected an integer or a list of integers, got true."),
        ("4", 'states.shape: not a shape; expected an integer or a list of integers, got "4".'),
        ([4, 0], "states.shape[1]: out of range; expected an integer >= 1, got 0."),
        ([4, "x"], 'states.shape[1]: not an integer; expected an integer >= 1, got "x".'),
    ],
)
def test_state_bad_shape(shape: Any, text: str) -> None:
    assert message(normalize_states, {"shape": shape}) == text


def test_state_bad_type_suggests() -> None:
    assert message(normalize_states, {"shape": 1, "type": "flaot"}) == (
        "states.type: unknown value; expected one of 'float', 'int', 'bool', 'uint8', got \"flaot\".\n  Did you mean "
        "'float'?"
    )
    assert message(normalize_states, {"x": {"shape": 1, "type": "integer"}}) == (
        "states.x.type: unknown value; expected one of 'float', 'int', 'bool', 'uint8', got \"integer\".\n  Did you "
        "mean 'int'?"
    )


def test_state_unknown_key_suggests() -> None:
    assert message(normalize_states, {"shape": 1, "typ": "float"}) == "states.typ: unknown key.\n  Did you mean 'type'?"
    assert message(normalize_states, {"a": {"shape": 1, "num_value": 3, "type": "int"}}) == (
        "states.a.num_value: unknown key.\n  Did you mean 'num_values'?"
    )
    assert message(normalize_states, {"shape": 1, "color": "red"}) == (
        "states.color: unknown key.\n  Accepted: shape, type, num_values, num_states, min_value, max_value."
    )


def test_state_num_values_and_num_states_together() -> None:
    assert message(normalize_states, {"shape": 1, "type": "int", "num_values": 3, "num_states": 3}) == (
        "states.num_states: num_states is the 2018 name of num_values; give only one of them."
    )


def test_state_num_values_only_for_int() -> None:
    assert message(normalize_states, {"shape": 1, "num_values": 3}) == (
        "states.num_values: only int states take num_values, this state is float."
    )
    assert message(normalize_states, {"shape": 1, "type": "bool", "num_states": 2}) == (
        "states.num_states: only int states take num_states, this state is bool."
    )
    assert message(normalize_states, {"shape": 1, "type": "int", "num_states": 0}) == (
        "states.num_states: out of range; expected an integer >= 1, got 0."
    )


def test_state_bounds() -> None:
    assert message(normalize_states, {"shape": 1, "min_value": 0}) == (
        'states: min_value and max_value go together; expected both or neither, got {"shape": 1, "min_value": 0}.'
    )
    assert message(normalize_states, {"shape": 1, "min_value": 1, "max_value": 1}) == (
        'states: min_value must be below max_value; got {"min_value": 1.0, "max_value": 1.0}.'
    )
    assert message(normalize_states, {"shape": 1, "min_value": "a", "max_value": 1}) == (
        'states.min_value: not a number; expected a number, got "a".'
    )
    assert message(normalize_states, {"shape": 1, "type": "bool", "min_value": 0, "max_value": 1}) == (
        "states: a bool state takes no min_value/max_value."
    )


def test_states_mixing_the_two_forms() -> None:
    assert message(normalize_states, {"shape": 4, "camera": {"shape": 2}}) == (
        "states.shape: mixes the single form and the named form.\n"
        f"  Write either one spec like {EXAMPLE}, or named specs {{name: {EXAMPLE}, ...}}."
    )


def test_state_names_must_be_strings() -> None:
    assert message(normalize_states, {1: {"shape": 1}, "a": {"shape": 1}}) == (
        "states.1: not a name; expected a non-empty string, got 1."
    )
    assert message(normalize_states, {"": {"shape": 1}}) == 'states.: not a name; expected a non-empty string, got "".'


def test_a_hand_built_state_spec_is_checked() -> None:
    assert message(normalize_states, StateSpec("x", (0,), "float")) == (
        "states.shape[0]: out of range; expected an integer >= 1, got 0."
    )


# -- actions: accepted ---------------------------------------------------------------------------------------------


def test_single_action() -> None:
    actions, single = normalize_actions({"type": "int", "num_actions": 2})
    assert single is True
    assert actions == {"action": ActionSpec("action", "int", (), 2)}


def test_action_types() -> None:
    actions, single = normalize_actions(
        {
            "move": {"type": "float", "shape": 2, "min_value": -1, "max_value": 1},
            "fire": {"type": "bool"},
            "turn": {"type": "float"},
            "gear": {"type": "int", "shape": [2], "num_actions": 5},
        }
    )
    assert single is False
    assert actions == {
        "fire": ActionSpec("fire", "bool"),
        "gear": ActionSpec("gear", "int", (2,), 5),
        "move": ActionSpec("move", "float", (2,), None, -1.0, 1.0),
        "turn": ActionSpec("turn", "float"),
    }
    assert list(actions) == ["fire", "gear", "move", "turn"]
    assert actions["move"].bounded and not actions["turn"].bounded
    assert actions["gear"].size == 2 and actions["fire"].size == 1


def test_named_actions_default_to_int() -> None:
    actions, single = normalize_actions({"b": {"num_actions": 3}, "a": {"num_actions": 2}})
    assert single is False
    assert actions == {"a": ActionSpec("a", "int", (), 2), "b": ActionSpec("b", "int", (), 3)}


def test_single_action_without_type_is_an_int() -> None:
    assert normalize_actions({"num_actions": 4}) == ({"action": ActionSpec("action", "int", (), 4)}, True)


def test_named_form_whose_entries_have_type_keys() -> None:
    actions, single = normalize_actions({"action1": {"type": "int", "num_actions": 2}})
    assert single is False
    assert actions == {"action1": ActionSpec("action1", "int", (), 2)}
    # an action may even be named "type"
    actions, single = normalize_actions({"type": {"type": "bool"}, "shape": {"type": "float", "shape": 3}})
    assert single is False
    assert actions == {"shape": ActionSpec("shape", "float", (3,)), "type": ActionSpec("type", "bool")}


def test_none_values_count_as_absent() -> None:
    actions, _ = normalize_actions({"type": "float", "num_actions": None, "min_value": None, "max_value": None})
    assert actions["action"] == ActionSpec("action", "float")
    actions, _ = normalize_actions({"type": "bool", "min_value": None})
    assert actions["action"] == ActionSpec("action", "bool")


def test_action_spec_passthrough() -> None:
    ready = ActionSpec("jump", "bool")
    assert normalize_actions(ready) == ({"jump": ready}, True)
    actions, single = normalize_actions({"b": ready, "a": {"type": "float"}})
    assert single is False
    assert actions == {"a": ActionSpec("a", "float"), "b": ActionSpec("b", "bool")}


def test_action_to_dict_round_trips() -> None:
    actions, _ = normalize_actions({"type": "float", "shape": [2], "min_value": -2.0, "max_value": 2.0})
    assert actions["action"].to_dict() == {"type": "float", "shape": [2], "min_value": -2.0, "max_value": 2.0}
    assert normalize_actions(actions["action"].to_dict())[0] == actions


# -- actions: refused ----------------------------------------------------------------------------------------------


AEXAMPLE = '{"type": "int", "num_actions": 2}'


@pytest.mark.parametrize(("spec", "got"), [("int", '"int"'), ([], "[]"), (None, "null")])
def test_actions_not_a_dict(spec: Any, got: str) -> None:
    assert message(normalize_actions, spec) == (
        f"actions: not an actions spec; expected {AEXAMPLE} or {{name: {{...}}, ...}}, got {got}."
    )


def test_actions_empty() -> None:
    assert (
        message(normalize_actions, {}) == f"actions: no actions given; expected {AEXAMPLE} or {{name: {{...}}, ...}}."
    )


def test_action_not_a_dict() -> None:
    assert message(normalize_actions, {"a": {"type": "bool"}, "b": "int"}) == (
        f'actions.b: not an action spec; expected a dict like {AEXAMPLE}, got "int".'
    )


def test_int_action_needs_num_actions() -> None:
    assert (
        message(normalize_actions, {"type": "int"})
        == 'actions: an int action needs \'num_actions\'; got {"type": "int"}.'
    )
    assert message(normalize_actions, {"fire": {"shape": 2}}) == (
        "actions.fire: an int action needs 'num_actions'; got {\"shape\": 2}."
    )
    assert message(normalize_actions, {"type": "int", "num_actions": 0}) == (
        "actions.num_actions: out of range; expected an integer >= 1, got 0."
    )
    assert message(normalize_actions, {"type": "int", "num_actions": True}) == (
        "actions.num_actions: not an integer; expected an integer >= 1, got true."
    )


@pytest.mark.parametrize("kind", ["float", "bool"])
def test_num_actions_only_for_int(kind: str) -> None:
    assert message(normalize_actions, {"type": kind, "num_actions": 2}) == (
        f"actions.num_actions: only int actions take num_actions, this action is {kind}."
    )


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (
            {"type": "float", "min_value": 0},
            'actions: min_value and max_value go together; expected both or neither, got {"type": "float", '
            '"min_value": 0}.',
        ),
        (
            {"type": "float", "max_value": 0},
            'actions: min_value and max_value go together; expected both or neither, got {"type": "float", '
            '"max_value": 0}.',
        ),
        (
            {"type": "float", "min_value": 1, "max_value": -1},
            'actions: min_value must be below max_value; got {"min_value": 1.0, "max_value": -1.0}.',
        ),
        (
            {"type": "float", "min_value": 0, "max_value": [1]},
            "actions.max_value: not a number; expected a number, got [1].",
        ),
    ],
)
def test_float_action_bounds(spec: dict, text: str) -> None:
    assert message(normalize_actions, spec) == text


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ({"type": "int", "num_actions": 2, "min_value": 0, "max_value": 1}, "int"),
        ({"type": "int", "num_actions": 2, "min_value": 0}, "int"),
        ({"type": "bool", "min_value": 0, "max_value": 1}, "bool"),
    ],
)
def test_bounds_only_for_float(spec: dict, kind: str) -> None:
    assert (
        message(normalize_actions, spec)
        == f"actions: only float actions take min_value/max_value, this action is {kind}."
    )


def test_action_unknown_key_suggests() -> None:
    assert message(normalize_actions, {"type": "int", "num_action": 2}) == (
        "actions.num_action: unknown key.\n  Did you mean 'num_actions'?"
    )
    assert message(normalize_actions, {"a": {"type": "float", "min": 0}}) == (
        "actions.a.min: unknown key.\n  Accepted: type, shape, num_actions, min_value, max_value."
    )


def test_action_bad_type_suggests() -> None:
    assert message(normalize_actions, {"type": "boolean"}) == (
        "actions.type: unknown value; expected one of 'float', 'int', 'bool', got \"boolean\".\n  Did you mean 'bool'?"
    )


def test_action_bad_shape() -> None:
    assert message(normalize_actions, {"type": "bool", "shape": [2, -1]}) == (
        "actions.shape[1]: out of range; expected an integer >= 1, got -1."
    )


def test_actions_mixing_the_two_forms() -> None:
    assert message(normalize_actions, {"type": "int", "num_actions": 2, "fire": {"type": "bool"}}) == (
        "actions.type: mixes the single form and the named form.\n"
        f"  Write either one spec like {AEXAMPLE}, or named specs {{name: {AEXAMPLE}, ...}}."
    )


def test_a_single_form_with_a_stray_name_is_an_unknown_key() -> None:
    assert message(normalize_actions, {"type": "int", "num_actions": 2, "fire": 1}) == (
        "actions.fire: unknown key.\n  Accepted: type, shape, num_actions, min_value, max_value."
    )


def test_a_hand_built_action_spec_is_checked() -> None:
    assert message(normalize_actions, ActionSpec("a", "int")) == (
        'actions: an int action needs \'num_actions\'; got {"type": "int", "shape": []}.'
    )
    assert message(normalize_actions, {"x": ActionSpec("x", "float", (), 3)}) == (
        "actions.x.num_actions: only int actions take num_actions, this action is float."
    )


def test_paths_follow_the_caller() -> None:
    assert message(normalize_actions, {"type": "int"}, "environment.actions") == (
        'environment.actions: an int action needs \'num_actions\'; got {"type": "int"}.'
    )
