"""The plots of a sweep (matplotlib, no display needed, no plotly): how much each key of the space mattered, and
how the trials went one after another."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchforce.plots import save_figure


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_importance(importances: Mapping[str, float], output: Path, *, title: str) -> Path:
    """A horizontal bar per key of the space, the most important on top: its share of the variance of the trials'
    values (Optuna's fANOVA importance, summing to 1)."""
    plt = _pyplot()
    ordered = sorted(importances.items(), key=lambda item: item[1])
    figure, axes = plt.subplots(figsize=(8, 1.2 + 0.5 * len(ordered)))
    bars = axes.barh([key for key, _ in ordered], [value for _, value in ordered], color="tab:blue")
    axes.bar_label(bars, labels=[f"{value:.2f}" for _, value in ordered], padding=3)
    axes.set_xlim(0, max(1.0, max((value for _, value in ordered), default=0) * 1.15))
    axes.set_xlabel("importance (share of the variance of the trials' values)")
    axes.set_title(f"{title}: hyperparameter importance")
    figure.tight_layout()
    save_figure(figure, output)
    plt.close(figure)
    return output


def plot_history(rows: Sequence[Any], metric: Any, output: Path, *, title: str) -> Path:
    """Each trial's value by trial number (completed trials as dots, pruned ones as crosses at their last
    intermediate value) and the best value so far as a step line. ``rows`` are ``sweep.TrialRow``s, ``metric``
    the sweep's ``Metric``."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    maximize = metric.direction == "maximize"
    figure, axes = plt.subplots(figsize=(8, 4.5))
    complete = sorted((row.number, row.value) for row in rows if row.state == "COMPLETE" and row.value is not None)
    pruned = sorted((row.number, row.value) for row in rows if row.state == "PRUNED" and row.value is not None)
    if complete:
        axes.scatter(*zip(*complete, strict=True), color="tab:blue", label="completed", zorder=3)
        best, line = None, []
        for number, value in complete:
            best = value if best is None or (value > best if maximize else value < best) else best
            line.append((number, best))
        axes.step(*zip(*line, strict=True), where="post", color="tab:orange", label="best so far")
    if pruned:
        axes.scatter(*zip(*pruned, strict=True), marker="x", color="tab:gray", label="pruned (last reported)")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("trial")
    axes.set_ylabel(f"{metric.name}" + (f" (last {metric.window} episodes)" if metric.name == "mean_return" else ""))
    axes.set_title(f"{title}: history ({'higher' if maximize else 'lower'} is better)")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    save_figure(figure, output)
    plt.close(figure)
    return output
