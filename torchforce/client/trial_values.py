"""What a sweep's trial is worth, as its driver (``torchforce.client.sweep_driver``) measures it: the intermediate
values its runs reach at every mark of ``REPORT_PERCENTS`` of their budget, reported to the pruner, and each run's
final value of the sweep's metric (its mean return over the last episodes, or its last evaluation)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchforce.client.errors import ClientWarning
from torchforce.client.experiment import Experiment
from torchforce.client.report import read_episodes, read_evaluations
from torchforce.client.sweep_file import (
    REPORT_PERCENTS,
)


@dataclass(frozen=True)
class RunProgress:
    """What one run of a trial has done, as the pruner sees it: its finished episodes and its budget
    (``total_timesteps`` and/or ``episodes``, whichever ends it first), and whether it has ended."""

    episodes: list[dict]
    total_timesteps: int | None
    total_episodes: int | None
    ended: bool = False

    def fraction(self, index: int) -> float:
        """How far into the budget episode ``index`` of the log ended (1.0: the budget is spent)."""
        record = self.episodes[index]
        parts = [record["timesteps"] / self.total_timesteps] if self.total_timesteps else []
        if self.total_episodes:
            parts.append(int(record.get("episode", index + 1)) / self.total_episodes)
        return max(parts, default=0.0)

    def reached(self) -> float:
        """How far the run has come (1.0 once it has ended)."""
        return 1.0 if self.ended else self.fraction(-1) if self.episodes else 0.0


def intermediate_values(runs: Sequence[RunProgress], window: int) -> dict[int, float]:
    """The trial's intermediate value at each mark of ``REPORT_PERCENTS`` that all its runs have passed: over its
    runs, the mean of each one's mean return of the last ``window`` episodes that ended by that mark. A mark by
    which some run has no finished episode has no value."""
    values: dict[int, float] = {}
    for percent in REPORT_PERCENTS:
        if any(run.reached() < percent / 100 for run in runs):
            break
        means = []
        for run in runs:
            returns = [r["return"] for i, r in enumerate(run.episodes) if run.fraction(i) <= percent / 100]
            if returns:
                means.append(sum(returns[-window:]) / len(returns[-window:]))
        if len(means) == len(runs):
            values[percent] = sum(means) / len(means)
    return values


def report_and_judge(trial: Any, runs: Sequence[RunProgress], window: int, reported: set[int]) -> int | None:
    """The driver's pruning step: report the trial's intermediate values not reported yet (``reported``, updated),
    asking the pruner after each; the percentage at which it says to stop the trial, or None. The values of a
    trial whose runs have all ended are reported (later trials are judged against them) but never pruned."""
    going = not all(run.ended for run in runs)
    for percent, value in sorted(intermediate_values(runs, window).items()):
        if percent in reported:
            continue
        trial.report(value, percent)
        reported.add(percent)
        if going and trial.should_prune():
            return percent
    return None


def final_value(runs: Sequence[Experiment], metric: str, window: int) -> list[float]:
    """Each run's metric at its end: the mean return of its last ``window`` episodes, or of its last evaluation
    (NaN for a run that has none)."""
    values = []
    for run in runs:
        if metric == "evaluation":
            records = read_evaluations(run.episode_log().with_name("evaluations.jsonl"))
            values.append(float(records[-1]["mean_return"]) if records else math.nan)
        else:
            returns = [r["return"] for r in read_episodes(run.episode_log())][-window:]
            values.append(sum(returns) / len(returns) if returns else math.nan)
    return values


def no_value(run: Experiment, metric: str, window: int) -> str:
    """Why ``final_value`` is NaN for ``run``: nothing to measure yet, or a result that is no number (a diverged
    policy, an environment's NaN rewards)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClientWarning)  # damaged lines: final_value's reading has reported them
        if metric == "evaluation":
            if read_evaluations(run.episode_log().with_name("evaluations.jsonl")):
                return f"{run.name}'s last evaluation has a mean return that is not a number"
            return f"{run.name} has no evaluation"
        if read_episodes(run.episode_log()):
            return f"{run.name}'s mean return of its last {window} episodes is not a number"
        return f"{run.name} has no finished episode"
