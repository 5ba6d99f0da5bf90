"""torchforce: the TensorForce library API and its experiment client, rebuilt on PyTorch."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__``, read when asked: importing the package imports nothing else (``python -m torchforce``
    takes the current folder off the path before any other import, see ``__main__``)."""
    if name != "__version__":
        raise AttributeError(f"module 'torchforce' has no attribute {name!r}")
    from importlib import metadata

    try:
        return metadata.version("torchforce")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+source"
