"""What a resolved experiment builds, and how: the check that its environment and agent build (once, then closed),
which ``tfcli experiment new`` runs before anything is written; the agent spec its worker builds, the environment its
agent acts in, and the CPUs and threads that process keeps busy; and a config's error placed at its experiment path
(``prefixed``), naming the file that part came from."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from torchforce.client import warm_start
from torchforce.client.experiment_warnings import warn_if_never_learning
from torchforce.client.monitor import check_monitors, in_scratch
from torchforce.client.project import Project
from torchforce.spec import SpecError, parse_frequency, warn_spec
from torchforce.spec.device import missing_gpu

CONFIG_KINDS = {"environment": "environments", "agent": "agents", "network": "networks", "cluster": "clusters"}


def check_buildable(spec: dict[str, Any], project: Project | None = None) -> None:
    """Build the environment and the agent once (then close them): every error names its experiment path. The agent
    is built, never trained: its optimizers come without torch's compiler (``without_the_compiler``), seconds
    sooner. With ``project``, a ``warm_start`` is checked on it too (its checkpoint's timestep recorded)."""
    from torchforce.agents import create_agent
    from torchforce.core.optimizers.torch_optimizers import without_the_compiler
    from torchforce.environments import make

    sources = spec.get("sources") or {}
    prefixed("environment", sources, lambda: check_monitors(spec["environment"], "environment"))
    with tempfile.TemporaryDirectory(prefix="tfcli-monitor-") as scratch:  # the run's monitor records untouched
        environment = prefixed("environment", sources, lambda: make(in_scratch(spec["environment"], Path(scratch))))
        kwargs: dict[str, Any] = {"states": environment.states, "actions": environment.actions}
        environment.close()
    if spec["network"] is not None:
        if "network" in spec["agent"]:
            raise SpecError(
                "experiment.network",
                "the agent config already has a network",
                hint="Give the network in one place: drop -M/network or the agent's 'network'.",
            )
        kwargs["network"] = spec["network"]
    worker_spec = worker_agent_spec(spec)
    agent_spec = runnable_here(worker_spec)
    if agent_spec is not worker_spec:
        warn_spec(
            f"experiment.agent.device: {spec['agent']['device']!r}, and this machine has no CUDA: the agent was "
            "checked on the CPU, and the run starts only where there is a GPU (a cluster with GPUs: start -c); "
            '"auto" takes a GPU where there is one, else the CPU'
        )
    try:
        with without_the_compiler():
            agent = prefixed("agent", sources, lambda: create_agent(agent_spec, **kwargs))
    except SpecError as error:
        raise _blame_the_network(error, spec, sources) from None
    warn_if_never_learning(spec, agent)
    try:
        if spec.get("warm_start") is not None and project is not None:
            warm_start.check_fits(project, spec, agent)
    finally:
        agent.close()
    if spec["run_mode"] == "distributed" and not agent.learning:
        raise SpecError(
            "experiment.run_mode",
            f"a distributed run trains one model on parameter servers, and a {agent.name} agent learns none",
            got="distributed",
            expected="'single' (or 'multi-threaded') for this agent",
        )


def _blame_the_network(error: SpecError, spec: dict[str, Any], sources: dict[str, str | None]) -> SpecError:
    """An error in the agent's network that came from the experiment's own ``network`` (-M), not from the agent's
    config: it is about ``experiment.network`` and that network's file."""
    match = re.fullmatch(r"experiment\.agent\.network([.\[].*)?", error.path)
    if spec["network"] is None or match is None:
        return error
    return SpecError(
        "experiment.network" + (match.group(1) or ""),
        error.message,
        got=error.got,
        expected=error.expected,
        hint=error.hint,
        file=sources.get("network"),
    )


def worker_agent_spec(spec: dict[str, Any], *, summaries: str | None = None) -> dict[str, Any]:
    """The agent spec a worker builds: saving is done by the worker itself, summaries go to ``summaries``."""
    # the worker saves; the experiment's run mode says how it runs (see _run_mode_from_execution)
    agent = {
        key: value for key, value in spec["agent"].items() if key not in ("saver", "summarizer", "seed", "execution")
    }
    if summaries is not None:
        frequency = parse_frequency(spec["summary_frequency"], "experiment.summary_frequency")
        unit = "steps" if frequency.unit == "timesteps" else "seconds"
        agent["summarizer"] = {"directory": summaries, unit: frequency.amount}
    if spec["seed"] is not None:
        agent["seed"] = spec["seed"]
    return agent


def runnable_here(agent_spec: dict[str, Any]) -> dict[str, Any]:
    """``agent_spec`` on the CPU when it names a CUDA device and this machine has none (an experiment made here for
    a cluster's GPUs, or an agent trained there and evaluated here: checkpoints load onto the CPU anyway); else
    ``agent_spec`` itself."""
    if not missing_gpu(agent_spec.get("device")):
        return agent_spec
    return {key: value for key, value in agent_spec.items() if key != "device"}


def acted_environment(spec: dict[str, Any], environment: Any) -> Any:
    """``environment`` as the agent of the experiment ``spec`` acts in it: with its ``repeat_actions``."""
    if spec["repeat_actions"] == 1:
        return environment
    return {"type": "repeat_actions", "environment": environment, "repeat": spec["repeat_actions"]}


def torch_threads_of(spec: dict[str, Any]) -> int:
    """The ``torch_threads`` of a resolved experiment; one for a run resolved before the field (as it ran then)."""
    return max(int(spec.get("torch_threads") or 1), 1)


def agent_process_cpus(spec: dict[str, Any]) -> int:
    """The CPUs one process that runs the agent keeps busy: its ``torch_threads``, times ``num_workers`` in the
    multi-threaded run mode, whose worker threads act and update at once (torch computes outside Python's lock), each
    on that many threads. In the distributed mode, each Ray worker's process."""
    threads = torch_threads_of(spec)
    if spec.get("run_mode") == "multi-threaded":
        return max(int(spec.get("num_workers") or 1), 1) * threads
    return threads


def prefixed(field: str, sources: dict[str, str | None], build: Any) -> Any:
    """``build()``, with a SpecError's path placed in the experiment (``environment.gym_id`` ->
    ``experiment.environment.gym_id``, ``num_nodes`` -> ``experiment.cluster.num_nodes``) and naming the config
    file that part came from."""
    try:
        return build()
    except SpecError as error:
        path = error.path
        head = re.split(r"[.\[]", path, maxsplit=1)[0]
        if head in CONFIG_KINDS:
            path = f"experiment.{path}"
        elif head != "experiment":
            path = f"experiment.{field}" + (f".{path}" if path and not path.startswith("[") else path)
        source = sources.get(head if head in CONFIG_KINDS else field)
        raise SpecError(
            path, error.message, got=error.got, expected=error.expected, hint=error.hint, file=error.file or source
        ) from None
