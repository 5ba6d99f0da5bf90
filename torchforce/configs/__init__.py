"""The default configs shipped with torchforce (agents, networks, environments, experiments, clusters, sweeps).

They are package data, so they are there after a plain ``pip install``: ``names("agents")`` lists the shipped agent
configs and ``shipped("agents", "ppo_cartpole")`` is the path of one. Agent configs are also taken by name where an
agent is named (``create_agent("ppo_cartpole", states=..., actions=...)``), and ``tfcli init`` copies them all into a
project's ``configs/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

KINDS = ("agents", "networks", "environments", "experiments", "clusters", "sweeps")
SUFFIXES = (".json", ".yaml", ".yml")


def folder(kind: str) -> Path:
    """The folder of the shipped configs of one kind (one of ``KINDS``)."""
    if kind not in KINDS:
        from torchforce.spec import unknown_name_error

        raise unknown_name_error("kind", "config kind", kind, KINDS)
    return Path(str(resources.files("torchforce") / "configs" / kind))


def names(kind: str) -> list[str]:
    """The names of the shipped configs of one kind, e.g. ``names("agents")`` -> ``["dqn", ...]``."""
    return sorted(path.stem for path in folder(kind).glob("*") if path.suffix in SUFFIXES)


def shipped(kind: str, name: str) -> Path:
    """The path of a shipped config, e.g. ``shipped("agents", "ppo_cartpole")``."""
    given = folder(kind) / name
    candidates = [given] if name.endswith(SUFFIXES) else [given.with_name(name + suffix) for suffix in SUFFIXES]
    path = next((candidate for candidate in candidates if candidate.is_file()), None)  # sweeps are YAML files
    if path is None:
        from torchforce.spec import unknown_name_error

        raise unknown_name_error(kind, f"shipped {kind[:-1]} config", name, names(kind))
    return path
