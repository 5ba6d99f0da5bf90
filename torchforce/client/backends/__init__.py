"""Backends run experiments: ``local`` (this machine, the default). Ray and GKE come later behind the same seam."""

from __future__ import annotations

from torchforce.client.backends.base import Backend
from torchforce.client.errors import ClientError

NAMES = ("local",)


def get_backend(name: str = "local") -> Backend:
    if name == "local":
        from torchforce.client.backends.local import LocalBackend

        return LocalBackend()
    raise ClientError(f"unknown backend '{name}'", hint="Available: " + ", ".join(NAMES) + ".")


__all__ = ["Backend", "NAMES", "get_backend"]
