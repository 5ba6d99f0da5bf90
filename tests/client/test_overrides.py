"""``--set KEY=VALUE`` on ``tfcli experiment new``: parsing, applying into nested specs (and into configs given by
name), errors that name the dotted path, and the stored experiment.json showing the overridden values."""

from __future__ import annotations

import json

import pytest

from tests.client.test_bad_input import bad
from torchforce.client.cli import main
from torchforce.client.overrides import (
    Override,
    apply_overrides,
    apply_to_experiment,
    blame,
    dotted,
    parse_key,
    parse_override,
    parse_value,
)
from torchforce.spec import SpecError

CHEAP = ["-A", "ppo_cartpole", "-E", "cartpole", "-t", "100"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3e-4", 3e-4),
        ("8", 8),
        ("-1", -1),
        ("true", True),
        ("null", None),
        ("[64, 64]", [64, 64]),
        ('{"type": "adam"}', {"type": "adam"}),
        ('"8"', "8"),
        ("Acrobot-v1", "Acrobot-v1"),
        ("NaN", "NaN"),
        ("-Infinity", "-Infinity"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_a_value_is_json_or_else_the_text(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_a_key_is_names_and_list_items():
    assert parse_key("agent.network[0].size") == ("agent", "network", 0, "size")
    assert parse_key("agent.network.0.size") == ("agent", "network", "0", "size")
    assert parse_key("experiment.seed") == ("seed",)  # as error messages write paths
    assert parse_key("network[1][0]") == ("network", 1, 0)
    assert dotted(("agent", "network", 0, "size")) == "agent.network[0].size"
    override = parse_override("agent.update_mode.batch_size=64=x")
    assert (override.steps, override.value, override.text) == (
        ("agent", "update_mode", "batch_size"),
        "64=x",
        "agent.update_mode.batch_size=64=x",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "learning_rate",
            "--set: not KEY=VALUE; expected a dotted key, '=' and a value, like agent.discount=0.99, "
            'got "learning_rate".',
        ),
        ("=5", "--set: not KEY=VALUE"),
        ("agent..discount=1", "--set: 'agent..discount' is not a dotted key"),
        ("agent.[0]=1", "--set: 'agent.[0]' is not a dotted key"),
        ("network[x]=1", "--set: 'network[x]' is not a dotted key"),
        ("experiment.=1", "--set: 'experiment.' is not a dotted key"),
    ],
)
def test_text_that_is_not_an_override(text, message):
    with pytest.raises(SpecError) as error:
        parse_override(text)
    assert str(error.value).startswith(message)


def overrides(*texts: str) -> list[Override]:
    return [parse_override(text) for text in texts]


def test_overrides_apply_in_order_into_nested_objects_and_lists_and_leave_the_input_alone():
    raw = {"name": "x", "agent": {"type": "ppo", "network": [{"size": 64}, {"size": 64}]}, "total_timesteps": 100}
    kept = json.loads(json.dumps(raw))
    changed = apply_overrides(
        raw,
        overrides(
            "agent.network[1].size=32",
            "agent.network.0.activation=tanh",
            "agent.step_optimizer.learning_rate=3e-4",  # not there yet: added, validation decides
            "num_environments=8",
            "total_timesteps=5",
            "total_timesteps=7",  # the last one wins
        ),
    )
    assert changed == {
        "name": "x",
        "agent": {
            "type": "ppo",
            "network": [{"size": 64, "activation": "tanh"}, {"size": 32}],
            "step_optimizer": {"learning_rate": 3e-4},
        },
        "total_timesteps": 7,
        "num_environments": 8,
    }
    assert raw == kept


def test_a_config_given_by_name_is_loaded_before_a_key_inside_it_is_set():
    loaded = []

    def load(field: str, name: str) -> dict:
        loaded.append((field, name))
        return {"type": "gym", "gym_id": "CartPole-v1", "from": name}

    raw = {"environment": "cartpole", "agent": "ppo_cartpole"}
    changed = apply_overrides(raw, overrides("environment.gym_id=Acrobot-v1", "agent=dqn_cartpole"), load)
    assert changed == {
        "environment": {"type": "gym", "gym_id": "Acrobot-v1", "from": "cartpole"},
        "agent": "dqn_cartpole",  # replaced whole: nothing to load
    }
    assert loaded == [("environment", "cartpole")]


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        (
            "num_environments.x=1",
            "experiment.num_environments: cannot hold 'x' (from --set num_environments.x=1); expected an object or a "
            "list, got 8.",
        ),
        (
            "agent.network.size=128",
            "experiment.agent.network: is a list of 2 items, so it has no key 'size' (from --set "
            "agent.network.size=128).\n  Set an item as agent.network[0].size=...",
        ),
        (
            "agent.network[2].size=128",
            "experiment.agent.network[2]: no such item (from --set agent.network[2].size=128); expected an index "
            "from 0 to 1.",
        ),
        ("agent[0]=1", "experiment.agent: is an object, so it has no item [0] (from --set agent[0]=1)."),
        (
            "agent.memory[0]=1",
            "experiment.agent.memory: is not set, so it has no item [0] (from --set agent.memory[0]=1).\n"
            "  Set the whole list: --set agent.memory='[...]'.",
        ),
        ("description.x=1", "experiment.description: cannot hold 'x' (from --set description.x=1)"),
    ],
)
def test_a_path_the_spec_cannot_take_is_an_error_naming_it(text, rendered):
    raw = {"num_environments": 8, "description": "d", "agent": {"network": [{"size": 64}, {"size": 64}]}}
    with pytest.raises(SpecError) as error:
        apply_overrides(raw, overrides(text), lambda field, name: name)
    assert str(error.value).startswith(rendered)


def test_a_validation_error_about_an_overridden_value_names_the_set():
    given = overrides("agent.discount=2", "agent.optimizer.learning_rate=1")
    error = blame(SpecError("experiment.agent.discount", "out of range", got=2, hint="Keep it below 1."), given)
    assert error.hint == "It came from --set agent.discount=2. Keep it below 1."
    added = blame(SpecError("experiment.agent.optimizer", "unknown argument"), given)  # a key the --set added
    assert added.hint == "It came from --set agent.optimizer.learning_rate=1."
    other = SpecError("experiment.agent.memory", "bad")
    assert blame(other, given) is other
    whole = SpecError("experiment", "bad")
    assert blame(whole, given) is whole


def test_a_set_whose_json_does_not_parse_says_why_it_was_taken_as_text(project, capsys):
    # a missing brace made the value text: the error said "not a dict, got a string" and nothing about the JSON
    text = 'evaluation={"frequency": "10000t", "episodes": 10'
    err = bad(project.root, capsys, "experiment", "new", "-n", "e1", *CHEAP, "--set", text)
    message, hint = err.splitlines()
    assert message.startswith("tfcli: experiment.evaluation: not a dict; expected a JSON object"), err
    why = "Expecting ',' delimiter: line 1 column 39 (char 38)"
    assert hint == f"  It came from --set {text}. Its value is text, not JSON ({why})."
    plain = blame(SpecError("experiment.agent.discount", "not a number", got="x"), overrides("agent.discount=x"))
    assert plain.hint == "It came from --set agent.discount=x."  # text that was never meant as JSON


def test_apply_to_experiment_loads_named_configs_and_replaces_the_2018_timesteps(project):
    raw = {"name": "x", "agent": "ppo_cartpole", "environment": "cartpole", "timesteps": 1000}
    changed = apply_to_experiment(project, raw, overrides("agent.discount=0.9", "total_timesteps=500"))
    assert changed["agent"]["type"] == "ppo" and changed["agent"]["discount"] == 0.9
    assert changed["agent"]["epochs"] == 10  # the rest of configs/agents/ppo_cartpole.json
    assert (changed["environment"], changed["total_timesteps"], "timesteps" in changed) == ("cartpole", 500, False)
    with pytest.raises(SpecError) as error:
        apply_to_experiment(project, {"agent": "ppo_cartpol"}, overrides("agent.discount=0.9"))
    assert str(error.value).startswith("experiment.agent: no agent config named 'ppo_cartpol'")


def test_experiment_new_stores_the_overridden_values(project):
    code = main(
        ["experiment", "new", "-n", "acro", "-A", "dqn_cartpole", "-E", "cartpole", "--episodes", "5"]
        + ["--set", "agent.optimizer.learning_rate=3e-4", "--set", "environment.gym_id=Acrobot-v1"]
        + ["--set", "num_environments=8", "--set", "agent.network[1].size=32"]
    )
    assert code == 0
    spec = json.loads((project.root / "experiments" / "acro" / "experiment.json").read_text())
    assert spec["agent"]["optimizer"] == {"type": "adam", "learning_rate": 3e-4}
    assert spec["agent"]["network"] == [{"type": "dense", "size": 128}, {"type": "dense", "size": 32}]
    assert spec["agent"]["memory"] == {"type": "replay", "capacity": 100000}  # the rest of the named config
    assert spec["environment"] == {"type": "gym", "gym_id": "Acrobot-v1"}
    assert (spec["num_environments"], spec["episodes"]) == (8, 5)


def test_an_override_of_a_file_is_validated_like_the_file_and_not_blamed_on_it(project, capsys):
    (project.root / "spec.json").write_text(
        json.dumps({"name": "f", "agent": "ppo_cartpole", "environment": "cartpole", "num_environments": 2})
    )
    err = bad(project.root, capsys, "experiment", "new", "-f", "spec.json", "--set", "num_environments=0")
    assert err.splitlines() == [
        "tfcli: experiment.num_environments: out of range; expected an integer >= 1, got 0.",
        "  It came from --set num_environments=0.",
    ]
    err = bad(project.root, capsys, "experiment", "new", "-f", "spec.json", "--set", "num_envs=8")
    assert "experiment.num_envs: unknown experiment field" in err and "Did you mean 'num_environments'?" in err
    err = bad(project.root, capsys, "experiment", "new", "-n", "x", *CHEAP, "--set", "agent.optimizer.learning_rate=1")
    assert "experiment.agent.optimizer: unknown argument for agent 'ppo'" in err
    assert "It came from --set agent.optimizer.learning_rate=1. Did you mean 'step_optimizer'?" in err
    err = bad(project.root, capsys, "experiment", "new", "-n", "x", *CHEAP, "--set", "seed")
    assert err.startswith("tfcli: --set: not KEY=VALUE;")
    assert main(["experiment", "new", "-f", "spec.json", "-t", "100", "--set", "num_environments=3"]) == 0
    assert json.loads((project.root / "experiments" / "f" / "experiment.json").read_text())["num_environments"] == 3


def test_a_set_of_a_field_that_a_flag_gives_otherwise_is_refused(project, capsys):
    err = bad(project.root, capsys, "experiment", "new", "-n", "d1", *CHEAP, "--set", "name=other")
    assert err.splitlines() == [
        "tfcli: experiment.name: given twice, by -n and by --set name=other; expected one of them.",
        "  Give -n alone, or --set name=other alone.",
    ]
    err = bad(project.root, capsys, "experiment", "new", "-n", "d1", *CHEAP, "--set", "total_timesteps=500")
    assert err.startswith("tfcli: experiment.total_timesteps: given twice, by -t and by --set total_timesteps=500;")
    assert [path.name for path in (project.root / "experiments").iterdir()] == []
    # the same value twice, or a key inside what a flag names, contradicts nothing
    argv = ["experiment", "new", "-n", "d1", *CHEAP, "--set", "name=d1", "--set", "agent.discount=0.9"]
    assert main(argv) == 0
    spec = json.loads((project.root / "experiments" / "d1" / "experiment.json").read_text())
    assert (spec["name"], spec["agent"]["discount"]) == ("d1", 0.9)


def test_a_spec_warning_is_one_line_naming_what_to_change(project, capsys, monkeypatch):
    """A spec that works but not as meant (here bfloat16 on a CPU that computes it in software) is told as one
    ``tfcli: warning:`` line, not as Python's warning with tfcli's own code line; the experiment is created."""
    import torchforce.core.networks

    monkeypatch.setattr(torchforce.core.networks, "cpu_bfloat16_native", lambda: False)
    argv = ["experiment", "new", "-n", "half", "-A", "dqn_cartpole", "-E", "cartpole", "--episodes", "5"]
    assert main([*argv, "--set", "agent.mixed_precision=bfloat16"]) == 0
    err = capsys.readouterr().err
    assert err.startswith('tfcli: warning: mixed_precision "bfloat16": this CPU has no bfloat16 instructions')
    assert err.count("\n") == 1 and "Use null (float32) here" in err
    spec = json.loads((project.root / "experiments" / "half" / "experiment.json").read_text())
    assert spec["agent"]["mixed_precision"] == "bfloat16"
