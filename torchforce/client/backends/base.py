"""The seam between experiments and where they run. Every backend (local, Ray, GKE) implements this small
interface; ``Experiment`` does the bookkeeping (state database, checks) around it.

A workload is known by a handle: the worker's process id on the local backend, a Ray job's submission id on a
Ray cluster, a RayJob's name on GKE. Its results are written to ``storage(folder)``, which the client reads
progress, logs and checkpoint pointers from; ``download`` brings them into the experiment's ``results/`` folder.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchforce.client.errors import ClientError, ClientWarning
from torchforce.client.storage import Storage
from torchforce.spec.device import gpu_index, needs_gpu, uses_gpu

Handle = int | str


#: the local worker's current folder in an experiment's folder, emptied at every start (nothing of the run's in it)
WORKSPACE = ".worker"


@dataclass(frozen=True)
class Launch:
    """How a run starts: ``resume`` from the latest checkpoint; ``max_restarts``: resume by itself after a crash,
    up to that many times; ``carry``: the checkpoint to resume from is in the experiment's ``results/`` (brought
    there from where it ran before), wherever the run writes now; ``trust_pickle``: unpickle the environments'
    state even when this user did not sign it."""

    resume: bool = False
    max_restarts: int = 0
    carry: bool = False
    trust_pickle: bool = False

    def worker_flags(self) -> list[str]:
        """The worker's command-line flags for these choices (the same on every backend)."""
        flags = ["--resume"] if self.resume else []
        flags += ["--max-restarts", str(self.max_restarts)] if self.max_restarts else []
        return flags + (["--trust-pickle"] if self.trust_pickle else [])


def upload_spec(run: Storage, folder: Path) -> None:
    """What a worker on a cluster reads from the run's folder ``run``: the experiment's spec, and the checkpoint a
    warm start begins from (``warm_start.pt``, where the experiment has one)."""
    from torchforce.client.warm_start import FILE_NAME

    run.upload(folder / "experiment.json", "experiment.json")
    if (folder / FILE_NAME).is_file():
        run.upload(folder / FILE_NAME, FILE_NAME)


def check_gpus(
    spec: dict[str, Any], where: str, gpus: float | None, *, per: str = "", visible: float | None = None
) -> None:
    """Refuse a run whose agent computes on a GPU only (``agent.device`` "cuda", "cuda:N") ``where`` there are no
    GPUs, or where a run sees fewer than its N + 1 (``gpus``: how many there are, ``per`` says where: " a node";
    ``visible``: how many a run sees, if fewer; None: not known, nothing checked), and warn when GPUs there would
    stay idle."""
    device = spec["agent"].get("device")
    if gpus is None:
        return
    fix = (
        f"Start it where there are GPUs, or make a copy that takes a GPU only where there is one: 'tfcli experiment "
        f"new -n {spec['name']}-auto -f experiments/{spec['name']}/experiment.json --set agent.device=auto'."
    )
    if needs_gpu(device) and not gpus:
        raise ClientError(
            f"experiment '{spec['name']}' computes on {device!r} (agent.device), and {where} has no GPUs", hint=fix
        )
    seen = gpus if visible is None else visible
    if needs_gpu(device) and gpu_index(device) >= seen:
        raise ClientError(
            f"experiment '{spec['name']}' computes on {device!r} (agent.device), and a run on {where} sees "
            f"{seen:g} GPU{'s' if seen != 1 else ''}{per if visible is None else ''}, numbered from 0",
            hint=f'Use "cuda" (the first GPU it sees): \'tfcli experiment new -n {spec["name"]}-gpu -f '
            f"experiments/{spec['name']}/experiment.json --set agent.device=cuda'.",
        )
    if gpus and not uses_gpu(device):
        warnings.warn(
            f"{where} has {gpus:g} GPU{'s' if gpus != 1 else ''}{per}, and experiment '{spec['name']}' computes on the "
            f'CPU (agent.device {"null" if device is None else repr(device)}): they stay idle; agent.device "auto" '
            'or "cuda" puts the agent on them',
            ClientWarning,
            stacklevel=2,
        )


class Backend:
    name: str = "backend"
    cluster: str | None = None
    supported_run_modes: tuple[str, ...] = ()
    # every cluster of this backend writes an experiment's results to the same folder (GKE: the run's bucket's), so
    # a run that moves between them finds its results in place: nothing is brought home and carried up again
    shared_storage: bool = False

    def check(self, spec: dict[str, Any]) -> None:
        """Refuse (ClientError) an experiment that cannot run here, before anything changes."""

    def start(self, folder: Path, project_root: Path, launch: Launch) -> Handle:
        """Launch the worker for the experiment in ``folder`` as ``launch`` says; returns its handle."""
        raise NotImplementedError

    def alive(self, handle: Handle | None, folder: Path | None = None) -> bool:
        """Whether the workload is still running (the one of the experiment in ``folder``, if given)."""
        raise NotImplementedError

    def signal(self, handle: Handle, request: str, timeout: float, folder: Path | None = None) -> bool:
        """Ask the workload to ``"pause"`` or ``"stop"`` (checkpointing first); True once it has ended."""
        raise NotImplementedError

    def outcome(self, handle: Handle | None, folder: Path) -> tuple[str, str | None] | None:
        """For a workload that has ended while its row still says running: the status it ended with and a message,
        or None when the worker writes its own status (the local backend) and so has died without one. A
        ClientError when the cluster cannot be asked just now: nothing is judged."""
        return None

    def storage(self, folder: Path) -> Storage:
        """Where the workload of the experiment in ``folder`` writes its results."""
        return Storage(folder / "results")

    def requested(self, folder: Path) -> str | None:
        """What the run's ``control.json`` asks of it ("pause", "stop"), if anything (the cluster backends signal
        through it)."""
        try:
            request = json.loads(self.storage(folder).read_text("control.json") or "{}").get("request")
        except (ValueError, AttributeError):
            return None
        return request if isinstance(request, str) else None

    def logs(self, handle: Handle | None, folder: Path) -> str:
        """The workload's log so far."""
        return self.storage(folder).read_text("worker.log") or ""

    def download(self, folder: Path) -> Path:
        """Bring the results to ``folder/results`` and return that folder."""
        raise NotImplementedError

    def discard(self, folder: Path) -> None:
        """Remove the results of an earlier run (``start --fresh``) wherever the workload writes them."""

    def stream_logs(self, handle: Handle | None, folder: Path) -> bool:
        """Print the workload's log as it grows, until it ends, where the backend can stream it; False when it
        cannot (the caller then polls ``logs``)."""
        return False

    def retire(self, handle: Handle | None, folder: Path, *, required: bool = True) -> None:
        """Remove what an earlier run left on this backend's cluster (a suspended RayJob) before a start that does
        not continue it (``--fresh``, or a run that moves elsewhere); when it cannot be removed now, a ClientError
        with nothing changed, or, not ``required`` (a run that ended, whose workload went as it ended), a warning.
        Nothing to do on this machine or a Ray cluster: an ended job holds nothing."""

    def release(self, handle: Handle | None, folder: Path, *, keep_own_cluster: bool = False) -> None:
        """Free what the run left on its cluster once the experiment has ended for good (finished, stopped or
        failed): nothing on this machine or a Ray cluster. ``keep_own_cluster``: a cluster made for the experiment
        stays (a resume is about to run there)."""
