"""Execution: runners that drive agents in environments, in one process, in threads, or on Ray.

TensorForce 0.4's names work: ``SingleRunner`` is ``Runner``, the module paths ``torchforce.execution.base_runner``
and ``torchforce.execution.threaded_runner`` name ``base`` and ``threaded``, and ``DistributedTFRunner`` (0.4's
``Runner`` for an agent that TensorFlow distributed) is ``Runner``, with a warning that points to
``DistributedRunner``, which runs parameter servers and workers on Ray.
"""

import importlib
import sys
import warnings
from typing import Any

from torchforce.execution.base import BaseRunner
from torchforce.execution.distributed import DistributedRunner
from torchforce.execution.runner import Runner
from torchforce.execution.threaded import ThreadedRunner, WorkerAgentGenerator, clone_worker_agent

SingleRunner = Runner  # 0.4's alias

LEGACY_MODULES = {"base_runner": "base", "threaded_runner": "threaded"}
for _legacy, _module in LEGACY_MODULES.items():
    sys.modules[f"{__name__}.{_legacy}"] = importlib.import_module(f"{__name__}.{_module}")


def __getattr__(name: str) -> Any:
    if name == "DistributedTFRunner":
        warnings.warn(
            "DistributedTFRunner is 0.4's name for Runner: there, TensorFlow distributed the agent itself. It runs "
            "one agent here; for parameter servers and workers, use DistributedRunner.",
            DeprecationWarning,
            stacklevel=2,
        )
        return Runner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BaseRunner",
    "DistributedRunner",
    "Runner",
    "SingleRunner",
    "ThreadedRunner",
    "WorkerAgentGenerator",
    "clone_worker_agent",
]
