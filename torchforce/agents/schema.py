"""JSON Schemas (draft 2020-12) of the agent configs, for editors: ``json_schema(PPOConfig)`` for one agent type,
``schemas()`` for every type and for any agent (``tfcli config schema`` writes them). They come from the config
classes themselves: each option's doc, default, JSON type (from its annotation) and range (from its check)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING
from typing import Any

from torchforce.agents.config import CONFIGS, SCHEMA_KEY, AgentConfig

JSON_SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _aliases(kind: str) -> list[str]:
    from torchforce.agents import AGENTS

    return sorted(alias for alias, name in AGENTS.aliases.items() if name == kind)


STATES_SCHEMA = {
    "type": "object",
    "description": "The states: one state spec (shape, type...) or {name: state spec}; usually the environment's.",
}
ACTIONS_SCHEMA = {
    "type": "object",
    "description": "The actions: one action spec (type, shape, num_actions...) or {name: action spec}; usually the "
    "environment's.",
}
NETWORK_SCHEMA = {
    "type": ["array", "object", "string"],
    "description": 'The policy network: a layer list, {"type": "module:Class"}, or a network config\'s name or '
    "path (a constructor argument, often given by the experiment).",
}
JSON_TYPES = {
    int: "integer",
    float: "number",
    bool: "boolean",
    str: "string",
    dict: "object",
    list: "array",
    type(None): "null",
}


def _json_types(annotation: Any) -> list[str]:
    """The JSON types of a field's annotation (``float | None`` -> number, null); none for ``Any``."""
    if annotation is Any:
        return []
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [kind for argument in typing.get_args(annotation) for kind in _json_types(argument)]
    return [JSON_TYPES[typing.get_origin(annotation) or annotation]]


def _field_schema(item: dataclasses.Field, annotation: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"description": item.metadata.get("doc", "")}
    kinds = _json_types(annotation)
    if kinds:
        schema["type"] = kinds[0] if len(kinds) == 1 else kinds
    check = item.metadata.get("check")
    if check is not None:
        schema |= check.schema()
        if "enum" in schema:
            schema.pop("type", None)
    if item.default is not MISSING:
        schema["default"] = item.default
    return schema


def json_schema(config: type[AgentConfig]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a flat agent spec of ``config``'s type: ``type`` (its name or 2018
    alias), ``states``/``actions`` (and ``network``), and every option with its doc, default, type and range."""
    hints = typing.get_type_hints(config)
    properties: dict[str, Any] = {
        SCHEMA_KEY: {
            "type": "string",
            "description": "The schema editors check this file with; torchforce ignores it.",
        },
        "type": {"enum": [config.kind, *_aliases(config.kind)], "description": "The agent type."},
        "states": STATES_SCHEMA,
        "actions": ACTIONS_SCHEMA,
    }
    if config.takes_network:
        properties["network"] = NETWORK_SCHEMA
    for item in dataclasses.fields(config):
        properties[item.name] = _field_schema(item, hints[item.name])
    return {
        "$schema": JSON_SCHEMA_DRAFT,
        "title": f"torchforce agent '{config.kind}'",
        "description": (config.__doc__ or "").strip().splitlines()[0],
        "type": "object",
        "properties": properties,
        "required": ["type"],
        "additionalProperties": False,
    }


def agent_schema(per_kind: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The schema of any agent spec: a union discriminated by ``type`` (each type's schema applies where ``type``
    names it), so an editor reports a typo against the right agent's options."""
    definitions = {
        kind: {key: value for key, value in schema.items() if key != "$schema"} for kind, schema in per_kind.items()
    }
    names = [name for schema in per_kind.values() for name in schema["properties"]["type"]["enum"]]
    return {
        "$schema": JSON_SCHEMA_DRAFT,
        "title": "torchforce agent",
        "description": "An agent spec of any type; its 'type' selects the options that apply.",
        "type": "object",
        "properties": {
            "type": {
                "description": "The agent type.",
                "anyOf": [
                    {"enum": names},
                    {"type": "string", "pattern": "[.:]", "description": "A user agent class by path."},
                ],
            }
        },
        "required": ["type"],
        "allOf": [
            {
                "if": {"properties": {"type": {"enum": schema["properties"]["type"]["enum"]}}, "required": ["type"]},
                "then": {"$ref": f"#/$defs/{kind}"},
            }
            for kind, schema in per_kind.items()
        ],
        "$defs": definitions,
    }


def schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every agent type by name, and of any agent under ``agent``."""
    per_kind = {kind: json_schema(config) for kind, config in CONFIGS.items()}
    return per_kind | {"agent": agent_schema(per_kind)}
