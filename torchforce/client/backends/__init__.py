"""Backends run experiments: ``local`` (this machine, the default), ``ray`` (a Ray cluster of the project, see
``tfcli cluster``) and ``gke`` (a RayJob on a GKE cluster of the project's linked Google Cloud project)."""

from __future__ import annotations

from typing import Any

from torchforce.client.backends.base import Backend, Handle, Launch
from torchforce.client.errors import ClientError

NAMES = ("local", "ray", "gke")


def get_backend(name: str = "local", *, project: Any = None, cluster: str | None = None) -> Backend:
    """The backend ``name``; the Ray backend also needs the project and the name of one of its clusters."""
    if name == "local":
        from torchforce.client.backends.local import LocalBackend

        return LocalBackend()
    if name == "ray":
        if project is None or cluster is None:
            raise ClientError("the Ray backend needs a cluster", hint="Give -c CLUSTER.")
        from torchforce.client.backends.ray import RayBackend

        return RayBackend(project, cluster)
    if name == "gke":
        if project is None or cluster is None:
            raise ClientError("the GKE backend needs a cluster", hint="Give -c CLUSTER.")
        from torchforce.client.backends.gke import GkeBackend

        return GkeBackend(project, cluster)
    raise ClientError(f"unknown backend '{name}'", hint="Available: " + ", ".join(NAMES) + ".")


__all__ = ["Backend", "Handle", "Launch", "NAMES", "get_backend"]
