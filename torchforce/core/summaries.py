"""TensorBoard summaries: the 2018 ``summarizer`` spec (directory, steps or seconds, labels) on real event files."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, SupportsFloat

from torchforce.spec import SpecError, did_you_mean, expect_dict, expect_float, expect_int

KEYS = ("directory", "steps", "seconds", "flush", "labels", "meta_dict")
# 2018 labels; those without a meaning here are accepted and ignored.
LABELS = (
    "graph",
    "losses",
    "total-loss",
    "variables",
    "inputs",
    "states",
    "actions",
    "rewards",
    "gradients",
    "gradients_histogram",
    "gradients_scalar",
    "regularization",
    "entropy",
    "relu",
    "beta",
    "activations",
    "configuration",
    "print_configuration",
    "learning_rate",
    "episode",
)


def label_of(name: str) -> str:
    """The 2018 label a scalar belongs to: ``episode/...`` -> episode, as are the run's own scalars that the
    client's worker writes (``run/...``: steps/s, the recent mean return; ``evaluation/...``), which are always
    written too; ``.../learning_rate...`` -> learning_rate, ``...entropy...`` -> entropy, ``...reward...`` ->
    rewards; every other update statistic (losses, KL, TD error, clip fraction) -> losses."""
    if name.startswith(("episode/", "run/", "evaluation/")):
        return "episode"
    for key, label in (("learning_rate", "learning_rate"), ("entropy", "entropy"), ("reward", "rewards")):
        if key in name:
            return label
    return "losses"


def learning_rate(optimizer: Any) -> float | None:
    """The current learning rate of a torchforce optimizer: a ``torch.optim`` optimizer's first param group, an
    optimizer's own ``learning_rate``, or that of the optimizer a meta optimizer wraps; None if it has none
    (e.g. a target-network synchronization)."""
    for _ in range(16):  # meta optimizers nest a few levels deep at most
        torch_optimizer = getattr(optimizer, "torch_optimizer", None)
        if torch_optimizer is not None and torch_optimizer.param_groups:
            return float(torch_optimizer.param_groups[0]["lr"])
        rate = getattr(optimizer, "learning_rate", None)
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return float(rate)
        optimizer = getattr(optimizer, "optimizer", None)
        if optimizer is None:
            return None
    return None


class Summarizer:
    """Writes scalars to TensorBoard event files, at most every ``steps`` timesteps or ``seconds`` seconds.

    Episode returns and lengths are always written, at every episode end; update scalars (losses, entropy,
    learning rates, the batch's mean reward) at the configured frequency. ``labels`` selects update scalars by
    2018 label (``losses`` or ``total-loss``, ``entropy``, ``learning_rate``, ``rewards``); an empty list means
    all of them, and labels without a meaning here (``graph``, ``variables``...) select nothing.
    """

    def __init__(self, spec: Any, path: str = "summarizer") -> None:
        spec = expect_dict(spec, path)
        for key in spec:
            if key not in KEYS:
                guess = did_you_mean(key, KEYS)
                raise SpecError(f"{path}.{key}", "unknown key", hint=f"Did you mean '{guess}'?" if guess else None)
        self.directory = spec.get("directory")
        self.steps = expect_int(spec.get("steps"), f"{path}.steps", minimum=1, allow_none=True)
        self.seconds = expect_float(spec.get("seconds"), f"{path}.seconds", minimum=0.0, allow_none=True)
        flush = expect_float(spec.get("flush", 10), f"{path}.flush", minimum=0.0)
        labels = spec.get("labels") or []
        if not isinstance(labels, (list, tuple)):
            raise SpecError(f"{path}.labels", "not a list", got=labels, expected='a list like ["losses", "entropy"]')
        for index, label in enumerate(labels):
            if label not in LABELS:
                guess = did_you_mean(label, LABELS)
                raise SpecError(
                    f"{path}.labels[{index}]",
                    f"unknown label {label!r}",
                    hint=f"Did you mean '{guess}'?" if guess else None,
                )
        self.labels = set(labels)
        self.writer = None
        if self.directory is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(self.directory), flush_secs=int(flush))
        self._last_step: int | None = None
        self._last_time = 0.0

    @property
    def enabled(self) -> bool:
        return self.writer is not None

    def due(self, timestep: int) -> bool:
        """Whether update scalars should be recorded now (and, if so, marks them recorded)."""
        if self.writer is None:
            return False
        if self.steps is not None and self._last_step is not None and timestep - self._last_step < self.steps:
            return False
        if self.seconds is not None and time.monotonic() - self._last_time < self.seconds:
            return False
        self._last_step, self._last_time = timestep, time.monotonic()
        return True

    def wants(self, label: str) -> bool:
        """Whether scalars of ``label`` are written; episode returns and lengths always are."""
        if label == "episode" or not self.labels:
            return True
        aliases = {"losses": "total-loss", "rewards": "inputs"}  # 2018: inputs = states, actions and rewards
        return label in self.labels or aliases.get(label) in self.labels

    def scalars(self, values: Mapping[str, SupportsFloat], timestep: int, prefix: str = "") -> None:
        """Write ``values`` (numbers, or 0-dim tensors read here; as ``prefix + name``) at ``timestep``, those whose
        label is wanted."""
        if self.writer is None:
            return
        for name, value in values.items():
            if self.wants(label_of(prefix + name)):
                self.writer.add_scalar(prefix + name, float(value), timestep)

    def hparams(self, values: dict[str, Any], metrics: Iterable[str]) -> None:
        """The run's hyperparameters for TensorBoard's HParams dashboard (numbers, strings, booleans; None left
        out), measured by the scalars named in ``metrics``, which the run writes with ``scalars`` as it goes (the
        dashboard shows each one's last value). Written once, at step 0, into the run's own event files, so the
        dashboard lists this run itself, next to its other scalars."""
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams

        # torch's hparams tests for numbers before booleans, which would turn them into 1.0 and 0.0
        plain = {name: str(value).lower() if isinstance(value, bool) else value for name, value in values.items()}
        experiment, start, _ = hparams(plain, dict.fromkeys(metrics, 0.0))
        events = self.writer._get_file_writer()  # what SummaryWriter's own add_* methods write through
        events.add_summary(experiment)
        events.add_summary(start)

    def resume_at(self, timestep: int) -> None:
        """Continue after a restored checkpoint at ``timestep``: the summaries an earlier run wrote after it are
        dropped (TensorBoard's ``purge_step``; what was written at it stays, as it is not written again), so a run
        resumed after a crash shows no step twice."""
        if self.writer is None:
            return
        from torch.utils.tensorboard import SummaryWriter

        directory, flush = self.writer.log_dir, self.writer.flush_secs
        own = Path(self.writer._get_file_writer().event_writer._file_name).name
        self.writer.close()
        _after_the_others(Path(directory), own)
        self.writer = SummaryWriter(log_dir=directory, flush_secs=flush, purge_step=timestep + 1)
        self._last_step = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _after_the_others(directory: Path, own: str) -> None:
    """Wait, where it must, for the purging writer's file to sort after every other in ``directory``. TensorBoard
    reads a folder's event files in the order of their names, which begin with the second a file was made and end
    with a count of the process's writers that sorts as text ("10" before "9"): a writer made in the same second as
    another's file (an agent restored in the process that wrote it, the moment after) could be read before it, and
    the summaries it purges come back. Files of earlier seconds (a run resumed in a new process) need no wait; nor
    do files stamped later than the next second (a clock set ahead where they were written, or a name made up),
    which no wait of a moment would pass: the run goes on rather than sleep until then."""
    now = int(time.time())
    seconds = [
        int(part)
        for path in directory.glob("events.out.tfevents.*")
        if path.name != own and (part := path.name.split(".")[3]).isdigit() and now <= int(part) <= now + 1
    ]
    if seconds:
        time.sleep(max(seconds) + 1 - time.time())
