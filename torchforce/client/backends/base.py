"""The seam between experiments and where they run. Every backend (local now; Ray and GKE later) implements this
small interface; ``Experiment`` does the bookkeeping (state database, checks) around it."""

from __future__ import annotations

from pathlib import Path


class Backend:
    name: str = "backend"
    supported_run_modes: tuple[str, ...] = ()

    def start(self, folder: Path, project_root: Path, *, resume: bool) -> int:
        """Launch the worker for the experiment in ``folder``; returns its process id (or a handle id)."""
        raise NotImplementedError

    def alive(self, pid: int | None, folder: Path | None = None) -> bool:
        """Whether the workload is still running (the one of the experiment in ``folder``, if given)."""
        raise NotImplementedError

    def signal(self, pid: int, request: str, timeout: float) -> bool:
        """Ask the workload to ``"pause"`` or ``"stop"`` (checkpointing first); True once it has ended."""
        raise NotImplementedError

    def download(self, folder: Path) -> Path:
        """Bring the results to ``folder/results`` and return that folder."""
        raise NotImplementedError
