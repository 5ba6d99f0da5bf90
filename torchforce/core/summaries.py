"""TensorBoard summaries: the 2018 ``summarizer`` spec (directory, steps or seconds, labels) on real event files."""

from __future__ import annotations

import time
from typing import Any

from torchforce.spec import SpecError, did_you_mean, expect_dict, expect_float, expect_int

KEYS = ("directory", "steps", "seconds", "flush", "labels", "meta_dict")
# 2018 labels; those without a meaning here are accepted and ignored.
LABELS = (
    "graph", "losses", "total-loss", "variables", "inputs", "states", "actions", "rewards", "gradients",
    "gradients_histogram", "gradients_scalar", "regularization", "entropy", "relu", "beta", "activations",
    "configuration", "print_configuration", "learning_rate", "episode",
)  # fmt: skip


class Summarizer:
    """Writes scalars to TensorBoard event files, at most every ``steps`` timesteps or ``seconds`` seconds.

    Episode returns and lengths are always written; update scalars (losses, entropy, learning rates) are written
    at the configured frequency. An empty ``labels`` list means everything.
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
        return not self.labels or label in self.labels or (label == "losses" and "total-loss" in self.labels)

    def scalars(self, values: dict[str, float], timestep: int, prefix: str = "") -> None:
        if self.writer is None:
            return
        for name, value in values.items():
            self.writer.add_scalar(prefix + name, float(value), timestep)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
