"""SpecError rendering, re-rooting and naming files; did_you_mean and unknown_name_error; the package surface.

The other parts of ``torchforce.spec`` have their own files: ``test_spec_checks.py`` (expect_*),
``test_spec_load.py`` (files), ``test_spec_registry.py`` (registries, import paths, kwargs),
``test_spec_spaces.py`` (states/actions) and ``test_spec_frequency.py`` ("600s").
"""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import torchforce.spec
from torchforce.spec import SpecError, did_you_mean, unknown_name_error
from torchforce.spec.errors import indefinite, type_name, what_it_is

# -- rendering -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (SpecError("agent.memory", "bad thing"), "agent.memory: bad thing."),
        # a message's own full stop is not doubled
        (SpecError("agent.memory", "bad thing."), "agent.memory: bad thing."),
        (SpecError("", "bad thing"), "bad thing."),
        (
            SpecError("agent.update_mode.batch_size", "out of range", expected="an integer >= 1"),
            "agent.update_mode.batch_size: out of range; expected an integer >= 1.",
        ),
        (
            SpecError("agent.update_mode.batch_size", "out of range", got=-4, expected="an integer >= 1"),
            "agent.update_mode.batch_size: out of range; expected an integer >= 1, got -4.",
        ),
        # the shapes: "got" without "expected" follows a semicolon; an empty message leaves "expected, got"
        (
            SpecError("network[2]", "layer 'dense' needs 'size'", got={"type": "dense", "activation": "relu"}),
            """network[2]: layer 'dense' needs 'size'; got {"type": "dense", "activation": "relu"}.""",
        ),
        (
            SpecError("agent.update_mode.batch_size", "", got=-4, expected="an integer > 0"),
            "agent.update_mode.batch_size: expected an integer > 0, got -4.",
        ),
        (SpecError("agent.memory", ""), "agent.memory."),
        # got renders as JSON, whatever it is, including empty and null values
        (SpecError("memory", "needs 'capacity'", got={}), "memory: needs 'capacity'; got {}."),
        (SpecError("memory", "needs 'capacity'", got=[]), "memory: needs 'capacity'; got []."),
        (SpecError("memory", "not a number", got=None), "memory: not a number; got null."),
        (SpecError("memory", "not a number", got=""), 'memory: not a number; got "".'),
        (SpecError("memory", "not a number", got=False), "memory: not a number; got false."),
        (SpecError("memory", "bad shape", got=(2, 3)), "memory: bad shape; got [2, 3]."),
    ],
)
def test_render(error: SpecError, text: str) -> None:
    assert str(error) == text
    assert error.args == (text,)


def test_render_names_the_file_before_the_full_stop_and_the_hint_after() -> None:
    error = SpecError(
        "agent.memory.type",
        'unknown memory "replay_buffer"',
        hint="Known: latest, prioritized_replay, replay. Did you mean 'replay'?",
        file="configs/agents/dqn.json",
    )
    assert str(error) == (
        'agent.memory.type: unknown memory "replay_buffer" (in configs/agents/dqn.json).\n'
        "  Known: latest, prioritized_replay, replay. Did you mean 'replay'?"
    )


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            SpecError("memory", "needs 'capacity'", got={}, file="a.json"),
            "memory: needs 'capacity'; got {} (in a.json).",
        ),
        (
            SpecError("memory.capacity", "out of range", got=0, expected="an integer >= 1", file="a.json"),
            "memory.capacity: out of range; expected an integer >= 1, got 0 (in a.json).",
        ),
        (
            SpecError("", "malformed JSON at line 1, column 1", file="a.json"),
            "malformed JSON at line 1, column 1 (in a.json).",
        ),
        (SpecError("memory", "bad.", file="a.json", hint="Fix it."), "memory: bad (in a.json).\n  Fix it."),
    ],
)
def test_render_with_a_file(error: SpecError, text: str) -> None:
    assert str(error) == text


def test_render_shows_what_json_cannot_as_python_and_shortens_long_values() -> None:
    class Thing:
        def __repr__(self) -> str:
            return "<Thing>"

    assert str(SpecError("x", "bad", got=Thing())) == "x: bad; got <Thing>."
    assert str(SpecError("x", "bad", got={1, 2})) == "x: bad; got {1, 2}."
    long = SpecError("x", "bad", got=list(range(100)))
    rendered = str(long)
    assert rendered.startswith("x: bad; got [0, 1, 2, ")
    assert rendered.endswith("...")  # shortened, and no extra full stop after the ellipsis
    assert len(rendered) == len("x: bad; got ") + 120


def test_render_shows_numpy_values_as_plain_numbers_and_lists() -> None:
    import numpy as np

    assert str(SpecError("x", "bad", got=np.int64(3))) == "x: bad; got 3."
    assert str(SpecError("x", "bad", got=np.float32(0.5))) == "x: bad; got 0.5."
    assert str(SpecError("x", "bad", got=np.array([1, 2]))) == "x: bad; got [1, 2]."


class Gadget:
    def __repr__(self) -> str:
        return "Gadget(\n  a long,\n  multi-line repr)"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.1, "x: bad; got 0.1."),  # a plain value shows itself, unquoted
        ("dense", 'x: bad; got "dense".'),
        (None, "x: bad; got null."),
        (Gadget(), f"x: bad; got an instance of {__name__}.Gadget."),  # never the repr of an object
        (Gadget, f"x: bad; got the class {__name__}.Gadget."),
        (abs, "x: bad; got the function abs."),
        (Path, "x: bad; got the class pathlib.Path."),
        (Path("a"), "x: bad; got an instance of pathlib.PosixPath."),
    ],
)
def test_what_it_is_names_objects_by_their_type(value: object, text: str) -> None:
    assert str(SpecError("x", "bad", got=what_it_is(value))) == text


def test_type_name_uses_the_shortest_public_module() -> None:
    import collections

    assert type_name(int) == "int"
    assert type_name(collections.OrderedDict) == "collections.OrderedDict"
    assert type_name(Gadget) == f"{__name__}.Gadget"
    assert [indefinite(word) for word in ("int", "dict", "Environment", "array")] == [
        "an int",
        "a dict",
        "an Environment",
        "an array",
    ]


def test_spec_error_is_a_value_error_with_its_fields() -> None:
    error = SpecError("p", "m", got=1, expected="e", hint="h", file="f")
    assert isinstance(error, ValueError)
    assert (error.path, error.message, error.got, error.expected, error.hint, error.file) == (
        "p",
        "m",
        1,
        "e",
        "h",
        "f",
    )


def test_spec_error_survives_pickle_and_copy() -> None:
    # errors travel back from worker processes pickled
    error = SpecError("agent.memory", "bad", got={"a": 1}, expected="x", hint="Try y.", file="a.json")
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert isinstance(clone, SpecError)
        assert str(clone) == str(error)
        assert (clone.path, clone.got, clone.expected, clone.hint, clone.file) == (
            "agent.memory",
            {"a": 1},
            "x",
            "Try y.",
            "a.json",
        )


# -- under / with_file ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "prefix", "rooted"),
    [
        ("capacity", "agent.memory", "agent.memory.capacity"),
        ("memory.capacity", "agent", "agent.memory.capacity"),
        ("[2]", "network", "network[2]"),
        ("[2].size", "network", "network[2].size"),
        ("[0][1]", "layers", "layers[0][1]"),
        ("", "agent.memory", "agent.memory"),
        ("capacity", "", "capacity"),
    ],
)
def test_under(path: str, prefix: str, rooted: str) -> None:
    error = SpecError(path, "out of range", got=0)
    assert error.under(prefix) is error
    assert error.path == rooted
    assert str(error) == f"{rooted}: out of range; got 0."
    assert error.args == (str(error),)


def test_under_nests() -> None:
    error = SpecError("[1]", "not a layer", got=3).under("layers").under("network").under("agent")
    assert str(error) == "agent.network.layers[1]: not a layer; got 3."


def test_under_an_empty_path_message_only() -> None:
    assert str(SpecError("", "bad thing").under("agent")) == "agent: bad thing."


def test_with_file() -> None:
    error = SpecError("agent.memory", "bad", got=1)
    assert error.with_file("a.json") is error
    assert str(error) == "agent.memory: bad; got 1 (in a.json)."
    assert error.args == (str(error),)
    # the first file named wins: an inner file's error keeps its file when an outer loader names its own
    error.with_file("outer.json")
    assert error.file == "a.json"
    assert str(error) == "agent.memory: bad; got 1 (in a.json)."


def test_with_file_then_under() -> None:
    error = SpecError("[0]", "bad", hint="Fix it.").with_file("net.yaml").under("network")
    assert str(error) == "network[0]: bad (in net.yaml).\n  Fix it."


def test_with_file_accepts_a_path() -> None:
    assert SpecError("a", "bad").with_file(Path("x") / "a.json").file == str(Path("x") / "a.json")


# -- suggestions ---------------------------------------------------------------------------------------------------


def test_did_you_mean() -> None:
    assert did_you_mean("replay_buffer", ["latest", "prioritized_replay", "replay"]) == "replay"
    assert did_you_mean("capcity", ["capacity", "include_next_states"]) == "capacity"
    assert did_you_mean("Adam", ["adam", "sgd"]) == "adam"
    assert did_you_mean("zzz", ["capacity", "include_next_states"]) is None
    assert did_you_mean("x", []) is None
    assert did_you_mean(12, [1, 12, 123]) == "12"  # non-strings are compared as text


def test_unknown_name_error() -> None:
    error = unknown_name_error(
        "agent.memory.type", "memory", "replay_buffer", ["replay", "latest", "prioritized_replay", "replay"]
    )
    assert isinstance(error, SpecError)
    assert str(error) == (
        'agent.memory.type: unknown memory "replay_buffer".\n'
        "  Known: latest, prioritized_replay, replay. Did you mean 'replay'?"
    )


def test_unknown_name_error_takes_a_dict_and_a_file_and_may_have_no_suggestion() -> None:
    error = unknown_name_error("actions_exploration.jump", "action", "jump", {"move": 1, "fire": 2}, file="a.json")
    assert str(error) == 'actions_exploration.jump: unknown action "jump" (in a.json).\n  Known: fire, move.'


def test_unknown_name_error_suggests_aliases_but_does_not_list_them() -> None:
    error = unknown_name_error("agent.type", "agent", "ppo_agnet", ["dqn", "ppo"], aliases=["dqn_agent", "ppo_agent"])
    assert str(error) == "agent.type: unknown agent \"ppo_agnet\".\n  Known: dqn, ppo. Did you mean 'ppo_agent'?"
    # a table name is preferred over an alias when both are close
    error = unknown_name_error("agent.type", "agent", "ppo_", ["dqn", "ppo"], aliases=["ppo_agent"])
    assert error.hint == "Known: dqn, ppo. Did you mean 'ppo'?"


def test_unknown_name_error_with_nothing_known() -> None:
    error = unknown_name_error("states.camera", "state", "camera", [])
    assert str(error) == 'states.camera: unknown state "camera".\n  No state is known here.'


# -- the package ---------------------------------------------------------------------------------------------------


def test_public_names() -> None:
    expected = {
        "ActionSpec",
        "Frequency",
        "Registry",
        "SpecError",
        "SpecWarning",
        "StateSpec",
        "check_kwargs",
        "check_provided",
        "did_you_mean",
        "expect_bool",
        "expect_choice",
        "expect_dict",
        "expect_float",
        "expect_int",
        "import_path",
        "load_file",
        "load_spec",
        "normalize_actions",
        "normalize_states",
        "parse_frequency",
        "unknown_name_error",
        "warn_spec",
    }
    assert set(torchforce.spec.__all__) == expected
    assert all(hasattr(torchforce.spec, name) for name in expected)


def test_importing_the_spec_package_imports_no_torch() -> None:
    code = "import sys, torchforce.spec; print('torch' in sys.modules, 'yaml' in sys.modules)"
    root = Path(torchforce.spec.__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert result.stdout.split() == ["False", "False"]
