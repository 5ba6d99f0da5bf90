"""Execution: runners that drive agents in environments."""

from torchforce.execution.runner import Runner

SingleRunner = Runner  # 2018 aliases
DistributedTFRunner = Runner

__all__ = ["DistributedTFRunner", "Runner", "SingleRunner"]
