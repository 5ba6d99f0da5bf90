"""Execution: runners that drive agents in environments."""

from torchforce.execution.runner import Runner
from torchforce.execution.threaded import ThreadedRunner, WorkerAgentGenerator, clone_worker_agent

SingleRunner = Runner  # 2018 aliases
DistributedTFRunner = Runner

__all__ = [
    "DistributedTFRunner",
    "Runner",
    "SingleRunner",
    "ThreadedRunner",
    "WorkerAgentGenerator",
    "clone_worker_agent",
]
