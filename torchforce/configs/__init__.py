"""The default configs shipped with torchforce (agents, networks, environments, experiments, clusters)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

KINDS = ("agents", "networks", "environments", "experiments", "clusters")


def folder(kind: str) -> Path:
    return Path(str(resources.files("torchforce") / "configs" / kind))


def shipped(kind: str, name: str) -> Path:
    """The path of a shipped config, e.g. ``shipped("agents", "ppo_cartpole")``."""
    path = folder(kind) / (name if name.endswith((".json", ".yaml")) else f"{name}.json")
    if not path.is_file():
        from torchforce.spec import unknown_name_error

        known = sorted(p.stem for p in folder(kind).glob("*.json"))
        raise unknown_name_error(kind, f"shipped {kind[:-1]} config", name, known)
    return path
