"""Registry, import_path and check_kwargs: every way to name a component, and every way to name it wrong.

The components are small classes in this module, registered by import path (``f"{__name__}:Replay"``), as a
project's registries name theirs.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from torchforce.spec import Registry, SpecError, check_kwargs, import_path

HERE = __name__
FIELDS = {"reward": ((), "float32")}


class Memory:
    """The base class; ``fields`` is what the caller provides."""

    def __init__(self, *, fields: dict, capacity: int = 1000, include_next_states: bool = False) -> None:
        self.fields = fields
        self.capacity = capacity
        self.include_next_states = include_next_states


class Latest(Memory):
    pass


class Replay(Memory):
    def __init__(self, *, fields: dict, capacity: int, include_next_states: bool = False) -> None:
        super().__init__(fields=fields, capacity=capacity, include_next_states=include_next_states)


class PrioritizedReplay(Replay):
    pass


class Flexible(Memory):
    """Takes **kwargs: any key may be meant for it, but 'capacity' is still required."""

    def __init__(self, *, fields: dict, capacity: int, **options: Any) -> None:
        super().__init__(fields=fields, capacity=capacity)
        self.options = options


class Checked(Memory):
    """Validates its own argument and raises with a path relative to itself."""

    def __init__(self, *, fields: dict, capacity: int = 10, where: str = "capacity") -> None:
        if capacity < 1:
            raise SpecError(where, "out of range", got=capacity, expected="an integer >= 1")
        super().__init__(fields=fields, capacity=capacity)


class NoFields(Memory):
    """A user class that cannot take what the caller provides."""

    def __init__(self, *, capacity: int = 10) -> None:
        self.capacity = capacity


class NotAMemory:
    def __init__(self, *, fields: dict) -> None:
        self.fields = fields


class Outer:
    class Inner:
        pass


def make_latest(*, fields: dict, capacity: int = 5) -> Memory:
    """A factory function registered instead of a class."""
    return Latest(fields=fields, capacity=capacity)


def failing(*, fields: dict) -> Memory:
    raise ValueError("capacity 3 is too small for a batch of 8")


MEMORIES = Registry(
    "memory",
    {
        "latest": f"{HERE}:Latest",
        "replay": f"{HERE}:Replay",
        "prioritized_replay": f"{HERE}:PrioritizedReplay",
    },
    aliases={"replay_memory": "replay", "naive_prioritized_replay": "prioritized_replay"},
    base=f"{HERE}:Memory",
)


def message(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def create(spec: Any, **kwargs: Any) -> Any:
    return MEMORIES.create(spec, "agent.memory", base=Memory, fields=FIELDS, **kwargs)


# -- names -----------------------------------------------------------------------------------------------------------


def test_names_and_canonical() -> None:
    assert MEMORIES.names() == ["latest", "prioritized_replay", "replay"]
    assert MEMORIES.canonical("replay") == "replay"
    assert MEMORIES.canonical("replay_memory") == "replay"
    assert MEMORIES.canonical("replay_buffer") is None
    assert MEMORIES.canonical(3) is None  # type: ignore[arg-type]
    assert MEMORIES.kind == "memory"
    assert "memory" in repr(MEMORIES)


def test_get_by_name_alias_and_path() -> None:
    assert MEMORIES.get("replay") is Replay
    assert MEMORIES.get("replay_memory") is Replay
    assert MEMORIES.get(f"{HERE}:Flexible") is Flexible
    assert MEMORIES.get(f"{HERE}.Flexible") is Flexible  # the 2018 dotted form


def test_get_unknown_name_lists_the_known_and_suggests() -> None:
    assert message(MEMORIES.get, "replay_buffer", "agent.memory.type") == (
        'agent.memory.type: unknown memory "replay_buffer".\n'
        "  Known: latest, prioritized_replay, replay. Did you mean 'replay'?"
    )


def test_get_unknown_name_without_a_suggestion() -> None:
    assert message(MEMORIES.get, "fifo") == 'type: unknown memory "fifo".\n  Known: latest, prioritized_replay, replay.'


def test_get_unknown_name_may_suggest_an_alias() -> None:
    agents = Registry("agent", {"dqn": f"{HERE}:Latest", "ppo": f"{HERE}:Replay"}, aliases={"ppo_agent": "ppo"})
    assert message(agents.get, "ppo_agnet", "agent.type") == (
        "agent.type: unknown agent \"ppo_agnet\".\n  Known: dqn, ppo. Did you mean 'ppo_agent'?"
    )


def test_get_needs_a_name() -> None:
    assert message(MEMORIES.get, 3, "agent.memory.type") == (
        "agent.memory.type: a memory type must be a name; expected a string, got 3."
    )


def test_a_broken_alias_is_an_unknown_name() -> None:
    registry = Registry("memory", {"replay": f"{HERE}:Replay"}, aliases={"old": "gone"})
    assert registry.canonical("old") is None
    assert message(registry.get, "old") == 'type: unknown memory "old".\n  Known: replay.'


# -- create: the accepted forms --------------------------------------------------------------------------------------


def test_create_from_a_dict_with_type() -> None:
    memory = create({"type": "replay", "capacity": 10, "include_next_states": True})
    assert type(memory) is Replay
    assert (memory.fields, memory.capacity, memory.include_next_states) == (FIELDS, 10, True)


def test_create_from_an_alias() -> None:
    assert type(create({"type": "replay_memory", "capacity": 10})) is Replay


def test_create_from_a_bare_name() -> None:
    memory = create("latest")
    assert type(memory) is Latest and memory.capacity == 1000 and memory.fields is FIELDS


def test_create_a_dict_without_type_takes_the_default() -> None:
    memory = create({"capacity": 10}, default="replay")
    assert type(memory) is Replay and memory.capacity == 10
    assert type(create({"type": None, "capacity": 10}, default="replay")) is Replay


def test_create_none_takes_the_default() -> None:
    assert type(create(None, default="latest")) is Latest


def test_create_an_instance_passes_through() -> None:
    ready = Replay(fields={}, capacity=3)
    assert create(ready) is ready
    assert MEMORIES.create(ready, "memory", base=Memory) is ready


def test_create_a_class_passes_through() -> None:
    memory = create(Latest)
    assert type(memory) is Latest and memory.fields is FIELDS
    memory = create({"type": Replay, "capacity": 4})  # a class as type, from Python code
    assert type(memory) is Replay and memory.capacity == 4
    assert type(MEMORIES.create(NotAMemory, "memory", fields={})) is NotAMemory  # no base: any class


def test_create_a_class_of_the_wrong_base() -> None:
    assert (
        message(create, NotAMemory) == "agent.memory: class NotAMemory is not a memory; expected a subclass of Memory."
    )
    assert message(create, {"type": NotAMemory}) == (
        "agent.memory.type: class NotAMemory is not a memory; expected a subclass of Memory."
    )


def test_create_by_import_path() -> None:
    assert type(create(f"{HERE}:Latest")) is Latest
    assert type(create({"type": f"{HERE}.Replay", "capacity": 2})) is Replay  # 2018 dotted form
    assert type(create({"type": f"{HERE}:Flexible", "capacity": 2, "color": "red"})) is Flexible


def test_create_with_a_factory_function() -> None:
    registry = Registry("memory", {"small": f"{HERE}:make_latest"})
    memory = registry.create({"type": "small", "capacity": 7}, "memory", base=Memory, fields=FIELDS)
    assert type(memory) is Latest and memory.capacity == 7
    assert message(registry.create, {"type": "small", "size": 7}, "memory", fields=FIELDS) == (
        "memory.size: unknown argument for memory 'small'.\n  Accepted: capacity."
    )


# -- create: bad specs -----------------------------------------------------------------------------------------------


def test_create_unknown_name() -> None:
    assert message(create, {"type": "replay_buffer", "capacity": 10}) == (
        'agent.memory.type: unknown memory "replay_buffer".\n'
        "  Known: latest, prioritized_replay, replay. Did you mean 'replay'?"
    )
    # a bare name is the spec itself, so the path has no ".type"
    assert message(create, "replay_buffer") == (
        'agent.memory: unknown memory "replay_buffer".\n'
        "  Known: latest, prioritized_replay, replay. Did you mean 'replay'?"
    )


def test_create_a_dict_without_type_and_no_default() -> None:
    assert message(create, {"capacity": 10}) == (
        "agent.memory: a memory spec needs 'type'; got {\"capacity\": 10}.\n"
        "  Known: latest, prioritized_replay, replay."
    )


@pytest.mark.parametrize(("spec", "got"), [([1, 2], "[1, 2]"), (3, "3"), (None, "null")])
def test_create_not_a_spec(spec: Any, got: str) -> None:
    assert message(create, spec) == (
        f"agent.memory: not a memory spec; expected a name or a dict with 'type', got {got}."
    )


def test_create_unknown_argument_suggests() -> None:
    assert message(create, {"type": "replay", "capcity": 10}) == (
        "agent.memory.capcity: unknown argument for memory 'replay'.\n  Did you mean 'capacity'?"
    )


def test_create_unknown_argument_lists_the_accepted() -> None:
    # 'fields' is provided by the caller, so it is not listed
    assert message(create, {"type": "replay", "capacity": 10, "color": "red"}) == (
        "agent.memory.color: unknown argument for memory 'replay'.\n  Accepted: capacity, include_next_states."
    )


def test_create_a_provided_argument_in_the_spec() -> None:
    assert message(create, {"type": "replay", "capacity": 10, "fields": {}}) == (
        "agent.memory.fields: set by torchforce, not by the spec.\n"
        "  Remove 'fields' from the spec; torchforce passes it itself."
    )
    # also for a class that takes **kwargs
    assert message(create, {"type": f"{HERE}:Flexible", "capacity": 10, "fields": {}}).startswith(
        "agent.memory.fields: set by torchforce, not by the spec."
    )


def test_create_missing_required_argument() -> None:
    # the shape "network[2]: layer 'dense' needs 'size'; got {...}", the whole spec shown
    assert message(create, {"type": "replay"}) == (
        "agent.memory: memory 'replay' needs 'capacity'; got {\"type\": \"replay\"}."
    )
    assert message(create, "replay") == "agent.memory: memory 'replay' needs 'capacity'."
    assert message(create, Replay) == "agent.memory: memory 'Replay' needs 'capacity'."


def test_create_a_class_with_kwargs_accepts_any_key_but_still_needs_required_ones() -> None:
    memory = create({"type": f"{HERE}:Flexible", "capacity": 3, "color": "red", "size": 2})
    assert memory.options == {"color": "red", "size": 2}
    assert message(create, {"type": f"{HERE}:Flexible", "color": "red"}) == (
        f"agent.memory: memory '{HERE}:Flexible' needs 'capacity'; "
        f'got {{"type": "{HERE}:Flexible", "color": "red"}}.'
    )


def test_create_a_constructor_that_cannot_take_the_provided_arguments() -> None:
    assert message(create, {"type": f"{HERE}:NoFields"}) == (
        f"agent.memory.type: memory '{HERE}:NoFields' cannot be built here: its constructor takes no 'fields'.\n"
        "  torchforce passes 'fields' to every memory; accept it as a keyword argument."
    )


def test_create_a_constructor_that_cannot_take_several_provided_arguments() -> None:
    with pytest.raises(SpecError) as caught:
        MEMORIES.create(f"{HERE}:NoFields", "memory", fields=FIELDS, rng=None)
    assert str(caught.value) == (
        f"memory: memory '{HERE}:NoFields' cannot be built here: its constructor takes no 'fields', 'rng'.\n"
        "  torchforce passes 'fields' and 'rng' to every memory; accept them as keyword arguments."
    )


# -- create: errors from the constructor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "where", "rooted"),
    [
        ("agent.memory", "capacity", "agent.memory.capacity"),  # relative: re-rooted
        ("agent.memory", "agent.memory.capacity", "agent.memory.capacity"),  # absolute: not doubled
        ("agent.memory", "agent.memory", "agent.memory"),
        ("agent.memory", "", "agent.memory"),  # the component itself
        ("agent.memory", "[2]", "agent.memory[2]"),
        ("agent.memory", "agent.memory[2]", "agent.memory[2]"),
        # a relative path that merely starts with the same letters is still relative
        ("memory", "memory_size", "memory.memory_size"),
        ("memory", "memory", "memory"),
        ("", "capacity", "capacity"),
    ],
)
def test_create_reroots_constructor_errors(path: str, where: str, rooted: str) -> None:
    spec = {"type": f"{HERE}:Checked", "capacity": 0, "where": where}
    with pytest.raises(SpecError) as caught:
        MEMORIES.create(spec, path, base=Memory, fields=FIELDS)
    assert caught.value.path == rooted
    assert str(caught.value) == f"{rooted}: out of range; expected an integer >= 1, got 0."


def test_create_lets_other_errors_through() -> None:
    registry = Registry("memory", {"failing": f"{HERE}:failing"})
    with pytest.raises(ValueError, match="capacity 3 is too small for a batch of 8") as caught:
        registry.create("failing", "memory", fields=FIELDS)
    assert not isinstance(caught.value, SpecError)


def test_create_a_broken_table_entry_names_the_path() -> None:
    registry = Registry("memory", {"gone": f"{HERE}:Gone"})
    assert message(registry.create, {"type": "gone"}, "agent.memory") == (
        f"agent.memory.type: module '{HERE}' has no attribute 'Gone'; got \"{HERE}:Gone\"."
    )


def test_split() -> None:
    assert MEMORIES.split("replay", "memory") == ("replay", {})
    assert MEMORIES.split({"type": "replay", "capacity": 3}, "memory") == ("replay", {"capacity": 3})
    assert MEMORIES.split({"capacity": 3}, "memory", "latest") == ("latest", {"capacity": 3})
    spec = {"type": "replay", "capacity": 3}
    MEMORIES.split(spec, "memory")
    assert spec == {"type": "replay", "capacity": 3}  # the spec is not changed


# -- import_path -----------------------------------------------------------------------------------------------------


def test_import_path_forms() -> None:
    import torchforce.spec.errors

    assert import_path("torchforce.spec.errors:SpecError") is SpecError
    assert import_path("torchforce.spec.errors:SpecError.render") is SpecError.render
    assert import_path(f"{HERE}:Outer.Inner") is Outer.Inner
    # the 2018 dotted form: the module is the longest prefix that imports
    assert import_path("torchforce.spec.Registry") is Registry
    assert import_path("torchforce.spec.errors.SpecError") is torchforce.spec.errors.SpecError
    assert import_path("torchforce.spec.errors.SpecError.render") is SpecError.render


@pytest.mark.parametrize(
    "target", ["Replay", "pkg:", ":Replay", "pkg.mod:", "a b:C", ".relative:C", "pkg..mod:C", "a:b:c", "pkg-x.mod:C"]
)
def test_import_path_malformed(target: str) -> None:
    assert message(import_path, target, "agent.memory.type") == (
        f"agent.memory.type: not an importable path; expected 'package.module:Class', got \"{target}\"."
    )


def test_import_path_not_a_string() -> None:
    assert message(import_path, 3) == "type: not an importable path; expected 'package.module:Class', got 3."


HINT = (
    "  Check the spelling, and that the package is installed (with tfcli, a project's own module goes in its "
    "modules/ folder)."
)


def test_import_path_missing_module() -> None:
    assert message(import_path, "torchforce_no_such_pkg.memories:Replay", "memory.type") == (
        "memory.type: cannot import module 'torchforce_no_such_pkg.memories': no module named "
        "'torchforce_no_such_pkg'; got \"torchforce_no_such_pkg.memories:Replay\".\n" + HINT
    )
    assert message(import_path, "torchforce_no_such_pkg.memories.Replay", "memory.type") == (
        "memory.type: cannot import module 'torchforce_no_such_pkg.memories': no module named "
        "'torchforce_no_such_pkg'; got \"torchforce_no_such_pkg.memories.Replay\".\n" + HINT
    )
    assert message(import_path, "torchforce.no_such_submodule:Thing") == (
        "type: cannot import module 'torchforce.no_such_submodule': no module named 'torchforce.no_such_submodule'; "
        'got "torchforce.no_such_submodule:Thing".\n' + HINT
    )


def test_import_path_missing_attribute() -> None:
    errors = "torchforce.spec.errors"
    assert message(import_path, f"{errors}:SpecErorr", "memory.type") == (
        f"memory.type: module '{errors}' has no attribute 'SpecErorr'; got \"{errors}:SpecErorr\".\n"
        "  Did you mean 'SpecError'?"
    )
    assert message(import_path, f"{errors}.SpecErorr") == (
        f"type: module '{errors}' has no attribute 'SpecErorr'; got \"{errors}.SpecErorr\".\n"
        "  Did you mean 'SpecError'?"
    )
    assert message(import_path, f"{errors}:Zzzzzz") == (
        f"type: module '{errors}' has no attribute 'Zzzzzz'; got \"{errors}:Zzzzzz\"."
    )
    assert message(import_path, f"{errors}:SpecError.rendr") == (
        f"type: 'SpecError' has no attribute 'rendr'; got \"{errors}:SpecError.rendr\".\n  Did you mean 'render'?"
    )


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path with user modules that fail to import; they are removed from sys.modules after."""
    (tmp_path / "tf_spec_missing_dependency.py").write_text("import tf_spec_not_installed\n")
    (tmp_path / "tf_spec_bad_name.py").write_text("from json import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("tf_spec_missing_dependency", "tf_spec_bad_name"):
        sys.modules.pop(name, None)


def test_import_path_a_module_whose_own_imports_fail(user_modules: Path) -> None:
    # the module exists, so the error is about what it imports, not "no module named <the module>"
    assert message(import_path, "tf_spec_missing_dependency:Net", "network") == (
        "network: importing module 'tf_spec_missing_dependency' failed: No module named 'tf_spec_not_installed'; "
        'got "tf_spec_missing_dependency:Net".'
    )
    with pytest.raises(ImportError) as raw:
        importlib.import_module("tf_spec_bad_name")
    assert message(import_path, "tf_spec_bad_name.Net", "network") == (
        f"network: importing module 'tf_spec_bad_name' failed: {raw.value}; got \"tf_spec_bad_name.Net\"."
    )


# -- check_kwargs ----------------------------------------------------------------------------------------------------


def function(a: int, *, b: int = 2, c: int) -> None:
    pass


def test_check_kwargs_accepts_a_complete_spec() -> None:
    check_kwargs(function, {"a": 1, "c": 3}, "f")
    check_kwargs(function, {"c": 3}, "f", provided=("a",))


def test_check_kwargs_unknown() -> None:
    assert message(check_kwargs, function, {"a": 1, "cc": 3}, "f") == "f.cc: unknown argument.\n  Did you mean 'c'?"
    assert message(check_kwargs, function, {"a": 1, "zzz": 3}, "") == "zzz: unknown argument.\n  Accepted: a, b, c."
    assert message(check_kwargs, lambda: None, {"x": 1}, "f") == "f.x: unknown argument.\n  Accepted: no arguments."
    assert message(check_kwargs, function, {"a": 1, "cc": 3}, "f", what="layer 'dense'") == (
        "f.cc: unknown argument for layer 'dense'.\n  Did you mean 'c'?"
    )


def test_check_kwargs_missing() -> None:
    assert message(check_kwargs, function, {"a": 1}, "f") == "f: needs 'c'; got {\"a\": 1}."
    spec = {"type": "dense"}
    assert message(check_kwargs, function, {}, "network[2]", provided=("a",), what="layer 'dense'", got=spec) == (
        "network[2]: layer 'dense' needs 'c'; got {\"type\": \"dense\"}."
    )
    assert message(check_kwargs, function, {}, "f", provided=("a",), got=...) == "f: needs 'c'."


def test_check_kwargs_with_var_kwargs() -> None:
    def open_ended(a: int, **kwargs: Any) -> None:
        pass

    check_kwargs(open_ended, {"a": 1, "anything": 2}, "f")
    assert message(check_kwargs, open_ended, {"anything": 2}, "f") == "f: needs 'a'; got {\"anything\": 2}."
    check_kwargs(open_ended, {"anything": 2}, "f", provided=("a",))


def test_check_kwargs_ignores_positional_only_and_var_positional() -> None:
    def positional(x: int, /, *args: int, y: int = 1) -> None:
        pass

    check_kwargs(positional, {"y": 2}, "f")
    assert message(check_kwargs, positional, {"x": 2}, "f") == "f.x: unknown argument.\n  Accepted: y."


def test_check_kwargs_on_a_class_uses_its_init() -> None:
    check_kwargs(Replay, {"capacity": 3}, "memory", provided=("fields",))
    assert message(check_kwargs, Replay, {}, "memory", provided=("fields",)) == "memory: needs 'capacity'; got {}."


def test_check_kwargs_skips_what_has_no_signature() -> None:
    class Opaque:
        @property
        def __signature__(self) -> Any:
            raise ValueError("no signature")

        def __call__(self, **kwargs: Any) -> None:
            pass

    check_kwargs(Opaque(), {"anything": 1}, "f")
