"""Execution: runners that drive agents in environments, in one process, in threads, or on Ray."""

from torchforce.execution.distributed import DistributedRunner
from torchforce.execution.runner import Runner
from torchforce.execution.threaded import ThreadedRunner, WorkerAgentGenerator, clone_worker_agent

SingleRunner = Runner  # 2018 aliases
DistributedTFRunner = DistributedRunner

__all__ = [
    "DistributedRunner",
    "DistributedTFRunner",
    "Runner",
    "SingleRunner",
    "ThreadedRunner",
    "WorkerAgentGenerator",
    "clone_worker_agent",
]
