"""torchforce: the TensorForce library API and its experiment client, rebuilt on PyTorch."""

from importlib import metadata

try:
    __version__ = metadata.version("torchforce")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
