"""Optional MLflow tracking of a run: the experiment's ``mlflow`` field, ``{"tracking_uri": URI, "experiment": NAME}``.

When it is set, the worker mirrors the run into an MLflow run of the MLflow experiment NAME (made if missing) at URI,
a local store needing no server (``file:///abs/mlruns``, ``sqlite:///abs/mlflow.db``) or a tracking server's
address: the resolved spec's scalar fields as parameters (``flat_params``), every episode's return and length,
steps/s and the recent mean return, evaluations, and at the end the final checkpoint as an artifact. The results
folder stays the record; MLflow is a copy for comparing runs in its interface.

mlflow is not a dependency of torchforce (``pip install torchforce[mlflow]``): it is imported only here, only when a
run is tracked, through ``importlib`` (its types stay out of ours). ``experiment new`` refuses the field where it is
missing (``check_installed``). mlflow 3 refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE`` is set; a run whose
experiment names one sets it, as the experiment asked for exactly that store.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchforce.spec import SpecError

LOG = logging.getLogger("torchforce.worker")
INSTALL_HINT = "pip install torchforce[mlflow]"
RECORD = "mlflow.json"  # in results/: the MLflow run this experiment's runs log into, and how far they got
SEND_SECONDS = 5.0  # metrics are sent in batches, at most this often (and at the end)
MAX_METRICS = 1000  # MLflow's limits per log_batch call
MAX_PARAMS = 100
MAX_PARAM_LENGTH = 6000  # MLflow 3's limit on a parameter's value
NAME_CHARACTERS = re.compile(r"[^\w./\- ]")  # what MLflow allows in parameter names, besides these


def check_installed(path: str = "experiment.mlflow") -> None:
    """A SpecError naming ``path`` unless mlflow can be imported here."""
    if importlib.util.find_spec("mlflow") is None:
        raise SpecError(
            path,
            "MLflow tracking needs the mlflow package, which is not installed",
            hint=f"Install it ({INSTALL_HINT}), or set mlflow to null.",
        )


def shown_uri(uri: str) -> str:
    """``uri`` as logs, records and messages show it: a user name and password in it (``https://user:token@host/``)
    as ``***``, since they are secrets (mlflow reads them from there; ``MLFLOW_TRACKING_USERNAME`` and
    ``MLFLOW_TRACKING_PASSWORD`` keep them out of the spec); any other URI as it is."""
    scheme, separator, rest = uri.partition("://")
    authority, slash, path = rest.partition("/")
    if not separator or "@" not in authority:
        return uri
    return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"


def flat_params(spec: Any, prefix: str = "") -> dict[str, str | int | float | bool]:
    """The scalar leaves of a nested spec, named by their path with dots (list items by index:
    ``agent.network.0.size``); None is left out. What MLflow takes as parameters and TensorBoard as
    hyperparameters."""
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (list, tuple)):
        items = enumerate(spec)  # type: ignore[assignment]
    else:
        return {} if spec is None else {prefix: spec if isinstance(spec, (str, int, float, bool)) else str(spec)}
    flat: dict[str, str | int | float | bool] = {}
    for key, value in items:
        flat.update(flat_params(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def spec_params(spec: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """A run's parameters: its resolved spec's scalar fields (``flat_params``), less the bookkeeping (where the
    configs came from, when the experiment was made), the tracking URI without its password (``shown_uri``)."""
    params = flat_params({key: value for key, value in spec.items() if key not in ("sources", "created_at")})
    if isinstance(params.get("mlflow.tracking_uri"), str):  # (a password in it is no parameter to send or show)
        params["mlflow.tracking_uri"] = shown_uri(str(params["mlflow.tracking_uri"]))
    return params


class MlflowRun:
    """The MLflow run of an experiment, fed by its worker. A new run (``resume`` False, or no ``mlflow.json`` in
    ``results``) makes one and logs the parameters; a resumed one logs on into the run ``mlflow.json`` names.

    Metrics wait in a buffer and go in batches (``flush``). ``mlflow.json`` counts what was sent, so a resumed
    run does not send again what the run before it sent after its checkpoint (episodes by number, other metrics
    by step): a resumed run replays those steps, and an exact resume replays them the same. A failure to send
    turns tracking off for the rest of the run, with a warning, and nothing is buffered after it: the results
    folder has it all anyway; a failure to start fails the run, as a misconfigured store should be found at once."""

    def __init__(self, settings: dict[str, Any], results: Path, spec: dict[str, Any], *, resume: bool) -> None:
        uri = settings["tracking_uri"]
        if uri.startswith("file:") or "://" not in uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = importlib.import_module("mlflow.tracking").MlflowClient(tracking_uri=uri)
        self.entities = importlib.import_module("mlflow.entities")
        self.record_file = results / RECORD
        record = self._read_record() if resume else None
        if record is None:
            experiment = self.client.get_experiment_by_name(settings["experiment"])
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else self.client.create_experiment(settings["experiment"])
            )
            run = self.client.create_run(
                experiment_id, run_name=spec["name"], tags={"torchforce.experiment": spec["name"]}
            )
            record = {"tracking_uri": shown_uri(uri), "experiment_id": experiment_id, "run_id": run.info.run_id}
            record["sent"] = {"episodes": 0, "timesteps": -1}
            self._log_params(record["run_id"], spec)
            self._write_record(record)
            LOG.info(
                "MLflow: run %s in experiment '%s' at %s", record["run_id"], settings["experiment"], shown_uri(uri)
            )
        else:
            self.client.update_run(record["run_id"], status="RUNNING")
            LOG.info("MLflow: continuing run %s at %s", record["run_id"], shown_uri(uri))
        self.record = record
        self.run_id: str = record["run_id"]
        self.replayed = dict(record["sent"])  # what the run before this one sent: not sent again
        self._pending: list[tuple[Any, int, int | None]] = []  # (metric, its step, its episode number)
        self._lock = threading.Lock()  # the multi-threaded run mode's workers log their episodes from their threads
        self._sent_at = time.monotonic()
        self.enabled = True

    def _read_record(self) -> dict[str, Any] | None:
        try:
            record = json.loads(self.record_file.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
            return None
        if not isinstance(record.get("sent"), dict):
            record["sent"] = {"episodes": 0, "timesteps": -1}
        return record

    def _write_record(self, record: dict[str, Any]) -> None:
        from torchforce.client.project import write_json_atomically

        write_json_atomically(self.record_file, record)

    def _log_params(self, run_id: str, spec: dict[str, Any]) -> None:
        # names with characters MLflow refuses get "_" for them (one value per name: MLflow refuses a repeated one)
        values = {
            NAME_CHARACTERS.sub("_", name): str(value)[:MAX_PARAM_LENGTH] for name, value in spec_params(spec).items()
        }
        params = [self.entities.Param(name, value) for name, value in sorted(values.items())]
        for start in range(0, len(params), MAX_PARAMS):
            self.client.log_batch(run_id, params=params[start : start + MAX_PARAMS])

    # ------------------------------------------------------------------ metrics

    def episode(self, record: dict[str, Any]) -> None:
        """A finished episode's return and length (a line of ``episodes.jsonl``), at its timestep."""
        if record["episode"] <= self.replayed["episodes"]:
            return  # sent by the run before this one
        now, step, number = int(time.time() * 1000), record["timesteps"], record["episode"]
        metrics = [
            (self.entities.Metric(name, float(record[key]), now, step), step, number)
            for name, key in (("episode/return", "return"), ("episode/length", "length"))
        ]
        self._keep(metrics)

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Metrics of the run at timestep ``step`` (steps/s, the recent mean return, an evaluation's results)."""
        if step <= self.replayed["timesteps"]:
            return
        now = int(time.time() * 1000)
        metrics = [(self.entities.Metric(name, float(value), now, step), step, None) for name, value in values.items()]
        self._keep(metrics)

    def _keep(self, metrics: Iterable[tuple[Any, int, int | None]]) -> None:
        """Buffer ``metrics`` for the next ``flush``; nothing once tracking is off (a long run would keep them all)."""
        with self._lock:
            if self.enabled:
                self._pending.extend(metrics)

    def flush(self, *, due_only: bool = False) -> None:
        """Send the metrics waiting (``due_only``: only when ``SEND_SECONDS`` have passed or a batch is full)."""
        with self._lock:
            if not self.enabled or not self._pending:
                return
            if due_only and time.monotonic() - self._sent_at < SEND_SECONDS and len(self._pending) < MAX_METRICS:
                return
            pending, self._pending = self._pending, []
            self._sent_at = time.monotonic()
        sent = dict(self.record["sent"])
        try:
            for start in range(0, len(pending), MAX_METRICS):
                batch = pending[start : start + MAX_METRICS]
                self.client.log_batch(self.run_id, metrics=[metric for metric, _, _ in batch])
                for _, step, episode in batch:
                    if episode is not None:
                        sent["episodes"] = max(sent["episodes"], episode)
                    else:
                        sent["timesteps"] = max(sent["timesteps"], step)
        except Exception as error:  # noqa: BLE001 - tracking is a copy: the run goes on without it
            LOG.warning("MLflow: sending metrics failed (%s); tracking is off for the rest of this run", error)
            with self._lock:  # and what other threads buffered meanwhile is dropped with it
                self.enabled = False
                self._pending.clear()
        self.record["sent"] = sent
        self._write_record(self.record)

    def end(self, outcome: str, checkpoint: Path | None) -> None:
        """The run ended ``outcome`` (finished, paused, stopped, failed): the last metrics, the final checkpoint
        as an artifact (``checkpoints/<folder>``) unless paused, and the MLflow run's status (a paused run is
        SCHEDULED: its resumption continues it)."""
        self.flush()
        if not self.enabled:
            return
        try:
            if checkpoint is not None and outcome in ("finished", "stopped"):
                self.client.log_artifacts(self.run_id, str(checkpoint), artifact_path=f"checkpoints/{checkpoint.name}")
            if outcome == "paused":
                self.client.update_run(self.run_id, status="SCHEDULED")
            else:
                status = {"finished": "FINISHED", "stopped": "KILLED"}.get(outcome, "FAILED")
                self.client.set_terminated(self.run_id, status=status)
        except Exception as error:  # noqa: BLE001 - as in flush
            LOG.warning("MLflow: ending the run failed (%s)", error)
