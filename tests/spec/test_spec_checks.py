"""The expect_* validators: what they accept, what they return, and the full message of each refusal."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from torchforce.spec import SpecError, expect_bool, expect_choice, expect_dict, expect_float, expect_int


def message(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# -- expect_int ----------------------------------------------------------------------------------------------------


def test_expect_int_accepts_ints_and_integral_floats() -> None:
    assert expect_int(3, "p") == 3
    assert expect_int(-3, "p") == -3
    value = expect_int(4.0, "p")
    assert value == 4 and type(value) is int
    value = expect_int(np.int64(7), "p", minimum=1)
    assert value == 7 and type(value) is int
    value = expect_int(np.float32(2.0), "p")
    assert value == 2 and type(value) is int


def test_expect_int_bounds_are_inclusive() -> None:
    assert expect_int(1, "p", minimum=1) == 1
    assert expect_int(5, "p", minimum=1, maximum=5) == 5


def test_expect_int_none() -> None:
    assert expect_int(None, "p", allow_none=True) is None
    assert message(expect_int, None, "agent.update_mode.batch_size", minimum=1) == (
        "agent.update_mode.batch_size: not an integer; expected an integer >= 1, got null."
    )


@pytest.mark.parametrize(
    ("value", "got"),
    [(True, "true"), (False, "false"), (4.5, "4.5"), ("3", '"3"'), ([3], "[3]"), (float("inf"), "Infinity")],
)
def test_expect_int_refuses_non_integers(value: Any, got: str) -> None:
    # a bool is not an int in a spec, although Python says it is
    assert message(expect_int, value, "agent.update_mode.batch_size") == (
        f"agent.update_mode.batch_size: not an integer; expected an integer, got {got}."
    )


@pytest.mark.parametrize(
    ("kwargs", "value", "text"),
    [
        ({"minimum": 1}, -4, "p: out of range; expected an integer >= 1, got -4."),
        ({"minimum": 1}, 0.0, "p: out of range; expected an integer >= 1, got 0."),
        ({"maximum": 10}, 11, "p: out of range; expected an integer <= 10, got 11."),
        ({"minimum": 0, "maximum": 10}, -1, "p: out of range; expected an integer in [0, 10], got -1."),
        ({"minimum": 0, "maximum": 10}, 11, "p: out of range; expected an integer in [0, 10], got 11."),
        ({"minimum": 0, "maximum": 10}, True, "p: not an integer; expected an integer in [0, 10], got true."),
    ],
)
def test_expect_int_ranges(kwargs: dict, value: Any, text: str) -> None:
    assert message(expect_int, value, "p", **kwargs) == text


# -- expect_float --------------------------------------------------------------------------------------------------


def test_expect_float_accepts_numbers() -> None:
    value = expect_float(3, "p")
    assert value == 3.0 and type(value) is float
    assert expect_float(0.5, "p", minimum=0.0, maximum=1.0) == 0.5
    assert expect_float(0.0, "p", minimum=0.0, maximum=1.0) == 0.0
    assert expect_float(1.0, "p", minimum=0.0, maximum=1.0) == 1.0
    value = expect_float(np.float32(0.25), "p")
    assert value == 0.25 and type(value) is float
    assert expect_float(None, "p", allow_none=True) is None


@pytest.mark.parametrize(
    ("value", "got"), [(True, "true"), ("0.1", '"0.1"'), (None, "null"), (float("nan"), "NaN"), ({}, "{}")]
)
def test_expect_float_refuses_non_numbers(value: Any, got: str) -> None:
    assert message(expect_float, value, "optimizer.learning_rate") == (
        f"optimizer.learning_rate: not a number; expected a number, got {got}."
    )


@pytest.mark.parametrize(
    ("kwargs", "value", "text"),
    [
        ({"minimum": 0.0}, -0.5, "p: out of range; expected a number in [0.0, inf], got -0.5."),
        ({"maximum": 1.0}, 2, "p: out of range; expected a number in [-inf, 1.0], got 2.0."),
        ({"minimum": 0.0, "maximum": 1.0}, 1.5, "p: out of range; expected a number in [0.0, 1.0], got 1.5."),
    ],
)
def test_expect_float_ranges(kwargs: dict, value: Any, text: str) -> None:
    assert message(expect_float, value, "p", **kwargs) == text


# -- expect_bool, expect_choice, expect_dict -----------------------------------------------------------------------


def test_expect_bool() -> None:
    assert expect_bool(True, "p") is True
    assert expect_bool(False, "p") is False
    assert message(expect_bool, 1, "saver.load") == "saver.load: not a boolean; expected true or false, got 1."
    assert (
        message(expect_bool, "true", "saver.load") == 'saver.load: not a boolean; expected true or false, got "true".'
    )
    assert message(expect_bool, None, "saver.load") == "saver.load: not a boolean; expected true or false, got null."


def test_expect_choice() -> None:
    assert expect_choice("episodes", "p", ["timesteps", "episodes"]) == "episodes"
    assert expect_choice("b", "p", iter(["a", "b"])) == "b"  # any iterable
    assert message(expect_choice, "episode", "update_mode.unit", ["timesteps", "episodes", "sequences"]) == (
        "update_mode.unit: unknown value; expected one of 'timesteps', 'episodes', 'sequences', got \"episode\".\n"
        "  Did you mean 'episodes'?"
    )


def test_expect_choice_without_a_suggestion() -> None:
    assert message(expect_choice, "zzz", "update_mode.unit", ["timesteps", "episodes"]) == (
        "update_mode.unit: unknown value; expected one of 'timesteps', 'episodes', got \"zzz\"."
    )
    assert message(expect_choice, 3, "update_mode.unit", ["timesteps", "episodes"]) == (
        "update_mode.unit: unknown value; expected one of 'timesteps', 'episodes', got 3."
    )
    assert message(expect_choice, ["a"], "p", ["a"]) == "p: unknown value; expected one of 'a', got [\"a\"]."


def test_expect_dict() -> None:
    spec = {"a": 1}
    assert expect_dict(spec, "p") is spec
    assert expect_dict({}, "p") == {}
    assert message(expect_dict, [1, 2], "agent.update_mode") == (
        "agent.update_mode: not a dict; expected a JSON object, got [1, 2]."
    )
    assert message(expect_dict, "latest", "agent.update_mode") == (
        'agent.update_mode: not a dict; expected a JSON object, got "latest".'
    )
