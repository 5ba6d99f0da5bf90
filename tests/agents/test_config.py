"""The typed agent configs (``torchforce.agents.config``): defaults, validation, specs and JSON Schemas."""

from __future__ import annotations

import dataclasses
import inspect
import json

import jsonschema
import pytest

from torchforce.agents import AGENTS
from torchforce.agents.config import (
    CONFIGS,
    ConstantConfig,
    DDPGConfig,
    DQFDConfig,
    DQNConfig,
    NAFConfig,
    PPOConfig,
    TRPOConfig,
    VPGConfig,
    config_class,
    parse,
)
from torchforce.agents.schema import json_schema, schemas
from torchforce.configs import folder
from torchforce.spec import SpecError

SHIPPED = sorted(folder("agents").glob("*.json"))
CONSTRUCTOR = {"self", "states", "actions", "network"}


def test_every_agent_type_has_a_config():
    assert sorted(CONFIGS) == AGENTS.names()
    for kind, config in CONFIGS.items():
        assert config.kind == kind
        assert config.takes_network == ("network" in inspect.signature(AGENTS.get(kind).__init__).parameters)


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_every_option_has_one_line_of_doc(kind):
    for name, doc in CONFIGS[kind].docs().items():
        assert doc and "\n" not in doc and doc.endswith("."), name


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        (PPOConfig, {"discount": "high"}, 'discount: not a number; expected a number, got "high".'),
        (PPOConfig, {"discount": 1.5}, "discount: out of range; expected a number in [0.0, 1.0], got 1.5."),
        (PPOConfig, {"subsampling_fraction": 0.0}, "subsampling_fraction: out of range; expected a number in (0, 1]"),
        (PPOConfig, {"optimization_steps": 0}, "optimization_steps: out of range"),
        (PPOConfig, {"epochs": 10**5}, "epochs: out of range; expected an integer in [1, 10000]"),
        (PPOConfig, {"minibatch_size": 8}, "minibatch_size: goes with 'epochs'."),
        (PPOConfig, {"normalize_advantages": 1}, "normalize_advantages: not a boolean"),
        (PPOConfig, {"baseline_mode": "state"}, "baseline_mode: unknown value"),
        (PPOConfig, {"gae_lambda": -0.1}, "gae_lambda: out of range"),
        (PPOConfig, {"seed": -1}, "seed: out of range"),
        (PPOConfig, {"seed": 2**64}, "seed: out of range; expected an integer in [0, 2^64 - 1]"),
        (PPOConfig, {"batched_observe": 1000}, "batched_observe: is true or false since 0.4"),
        (PPOConfig, {"batching_capacity": 0}, "batching_capacity: out of range"),
        (PPOConfig, {"scope": 3}, "scope: not a string"),
        (TRPOConfig, {"learning_rate": 0.0}, "learning_rate: out of range"),
        (TRPOConfig, {"ls_max_iterations": -1}, "ls_max_iterations: out of range"),
        (DQNConfig, {"target_update_weight": 0.0}, "target_update_weight: out of range; expected a number in (0, 1]"),
        (DQNConfig, {"target_sync_frequency": 0}, "target_sync_frequency: out of range"),
        (DQNConfig, {"huber_loss": -1}, "huber_loss: out of range"),
        (DQFDConfig, {"demo_sampling_ratio": 1.0}, "demo_sampling_ratio: out of range; expected a number in (0, 1)"),
        (DDPGConfig, {"entropy_regularization": 0.01}, "entropy_regularization: a deterministic policy has no entropy"),
        (NAFConfig, {"double_q_model": "yes"}, "double_q_model: not a boolean"),
    ],
)
def test_bad_values_name_their_key(config, options, message):
    with pytest.raises(SpecError) as error:
        config.from_spec(options)
    assert str(error.value).startswith(message)
    with pytest.raises(SpecError):  # the constructor checks alike: a config is never invalid
        config(**options)


def test_values_are_normalized():
    config = PPOConfig.from_spec({"optimization_steps": 4.0, "discount": 1})
    assert config.optimization_steps == 4 and type(config.optimization_steps) is int
    assert config.discount == 1.0 and type(config.discount) is float


def test_an_unknown_key_suggests_the_closest():
    with pytest.raises(SpecError, match=r"^discont: unknown argument for agent 'ppo'\.\n  Did you mean 'discount'\?"):
        PPOConfig.from_spec({"discont": 0.9})
    with pytest.raises(SpecError, match=r"^distributed: unknown argument"):  # only constant and random take it
        PPOConfig.from_spec({"distributed": {}})
    assert ConstantConfig.from_spec({"action_values": 1, "distributed": {"type": "single"}}).execution_spec == {
        "type": "single"
    }


def test_constructor_arguments_0_3_5_keys_and_types_are_refused():
    with pytest.raises(SpecError, match=r"^network: an argument of the agent's constructor"):
        PPOConfig.from_spec({"network": []})
    with pytest.raises(SpecError, match=r"^batch_size: 'batch_size' is the 0.3.5 name; use 'update_mode.batch_size'"):
        DQNConfig.from_spec({"batch_size": 32})
    with pytest.raises(SpecError, match=r'^type: not the type of a PPOConfig; expected "ppo", got "dqn"'):
        PPOConfig.from_spec({"type": "dqn"})
    with pytest.raises(SpecError, match=r"agent 'constant' needs 'action_values'"):
        ConstantConfig.from_spec({})
    assert PPOConfig.from_spec({"type": "ppo_agent", "$schema": "ppo.schema.json"}) == PPOConfig()


def test_configs_are_frozen():
    config = PPOConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.discount = 0.5  # type: ignore[misc]
    assert dataclasses.replace(config, discount=0.5).discount == 0.5
    with pytest.raises(SpecError, match="discount: out of range"):  # replace validates too
        dataclasses.replace(config, discount=5.0)


def test_resolve_overrides_a_config():
    base = PPOConfig(discount=0.9)
    assert PPOConfig.resolve(None, {"discount": 0.9}) == base
    assert PPOConfig.resolve(base, {}) is base
    assert PPOConfig.resolve(base, {"epochs": 3}) == PPOConfig(discount=0.9, epochs=3)
    with pytest.raises(SpecError, match="config: a ppo agent takes a PPOConfig"):
        PPOConfig.resolve(VPGConfig(), {})


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_to_spec_round_trips(kind):
    config = CONFIGS[kind](**({"action_values": 1} if kind == "constant" else {}))
    spec = config.to_spec()
    assert spec["type"] == kind and json.loads(json.dumps(spec)) == spec
    assert CONFIGS[kind].from_spec(spec) == config
    jsonschema.validate(spec, json_schema(CONFIGS[kind]))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_every_shipped_config_parses_and_round_trips(path):
    spec = json.loads(path.read_text())
    config, arguments = parse(spec)
    assert type(config) is config_class(spec["type"])
    assert set(arguments) <= {"network"} and arguments.get("network") == spec.get("network")
    assert type(config).from_spec(config.to_spec()) == config
    for key, value in spec.items():
        if key not in ("type", "network"):
            assert config.options()[key] == value, key


def test_parse_refuses_an_unknown_type():
    with pytest.raises(SpecError, match=r"(?s)^type: unknown agent \"ppp\".*Did you mean 'ppo'"):
        parse({"type": "ppp"})


# ------------------------------------------------------------------ JSON Schemas


@pytest.fixture(scope="module")
def all_schemas():
    return schemas()


def test_schemas_are_valid_draft_2020_12(all_schemas):
    assert set(all_schemas) == {*CONFIGS, "agent"}
    for schema in all_schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_a_schema_documents_every_option(all_schemas):
    schema = all_schemas["ppo"]
    assert schema["additionalProperties"] is False and schema["required"] == ["type"]
    assert schema["properties"]["type"]["enum"] == ["ppo", "ppo_agent"]
    assert set(schema["properties"]) == {"$schema", "type", "states", "actions", "network", *PPOConfig.docs()}
    assert schema["properties"]["subsampling_fraction"] == {
        "description": PPOConfig.docs()["subsampling_fraction"],
        "type": "number",
        "exclusiveMinimum": 0.0,
        "maximum": 1.0,
        "default": 0.1,
    }
    assert schema["properties"]["epochs"]["type"] == ["integer", "null"]
    assert schema["properties"]["baseline_mode"]["enum"] == ["states", "network", None]
    assert schema["properties"]["normalize_advantages"] == {
        "description": PPOConfig.docs()["normalize_advantages"],
        "enum": [True, False, "minibatch"],
        "default": False,
    }
    assert all_schemas["vpg"]["properties"]["normalize_advantages"]["type"] == "boolean"  # no minibatches there
    assert "network" not in all_schemas["constant"]["properties"]
    assert "default" not in all_schemas["constant"]["properties"]["action_values"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_every_shipped_config_validates(all_schemas, path):
    spec = json.loads(path.read_text())
    jsonschema.validate(spec, all_schemas[config_class(spec["type"]).kind])
    jsonschema.validate(spec, all_schemas["agent"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"discont": 0.9}, "'discont' was unexpected"),
        ({"discount": "high"}, "'high' is not of type 'number'"),
        ({"discount": 1.5}, "1.5 is greater than the maximum of 1"),
        ({"optimization_steps": 2.5}, "2.5 is not of type 'integer'"),
        ({"normalize_advantages": 1}, "1 is not one of [True, False, 'minibatch']"),
        ({"baseline_mode": "state"}, "'state' is not one of"),
        ({"type": "ppx"}, "'ppx' is not"),
        ({"target_sync_frequency": 10}, "'target_sync_frequency' was unexpected"),  # a DQN option, not PPO's
    ],
)
def test_a_typo_or_wrong_type_fails(all_schemas, change, message):
    spec = {**json.loads((folder("agents") / "ppo.json").read_text()), **change}
    for schema in (all_schemas["ppo"], all_schemas["agent"]):
        errors = [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(spec)]
        assert any(message in error for error in errors), errors
