"""The default configs shipped with torchforce (agents, networks, environments, experiments, clusters).

They are package data, so they are there after a plain ``pip install``: ``names("agents")`` lists the shipped agent
configs and ``shipped("agents", "ppo_cartpole")`` is the path of one. Agent configs are also taken by name where an
agent is named (``create_agent("ppo_cartpole", states=..., actions=...)``), and ``tfcli init`` copies them all into a
project's ``configs/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

KINDS = ("agents", "networks", "environments", "experiments", "clusters")


def folder(kind: str) -> Path:
    """The folder of the shipped configs of one kind (one of ``KINDS``)."""
    if kind not in KINDS:
        from torchforce.spec import unknown_name_error

        raise unknown_name_error("kind", "config kind", kind, KINDS)
    return Path(str(resources.files("torchforce") / "configs" / kind))


def names(kind: str) -> list[str]:
    """The names of the shipped configs of one kind, e.g. ``names("agents")`` -> ``["dqn", ...]``."""
    return sorted(path.stem for path in folder(kind).glob("*.json"))


def shipped(kind: str, name: str) -> Path:
    """The path of a shipped config, e.g. ``shipped("agents", "ppo_cartpole")``."""
    path = folder(kind) / (name if name.endswith((".json", ".yaml")) else f"{name}.json")
    if not path.is_file():
        from torchforce.spec import unknown_name_error

        raise unknown_name_error(kind, f"shipped {kind[:-1]} config", name, names(kind))
    return path
