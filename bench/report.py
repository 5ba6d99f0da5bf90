"""The benchmark report: markdown tables (median and range over seeds, ratio torchforce/SB3, targets) and the
learning-curve PNGs, from the records of one run. ``python bench/report.py RESULTS.jsonl`` prints it again;
``python bench/report.py FIRST.jsonl LATER.jsonl`` reports runs together (seeds added later with ``--first-seed``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
NAMES = {"torchforce": "torchforce", "sb3": "SB3", "gymnasium": "Gymnasium"}
COLORS = {"torchforce": "tab:blue", "sb3": "tab:orange"}


# ---------------------------------------------------------------------------------------------- numbers


def replace_section(readme: Path, name: str, lines: list[str]) -> None:
    """Put ``lines`` between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` of ``readme`` (a bench script's
    table)."""
    text = readme.read_text()
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{readme} has no {begin} ... {end} section to replace")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)


def publish(what: str, table: list[str], records: Path, section: str | None) -> None:
    """Print a bench script's run: its heading (``what``, then this machine: cores, processor, Python, torch and the
    load average at the end) over ``table``; with ``section``, also put them into that section of bench/README.md
    (``replace_section``)."""
    import torch

    heading = (
        f"{what}; {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python "
        f"{platform.python_version()}, torch {torch.__version__}, load average {os.getloadavg()[0]:.1f} at the end."
    )
    lines = [*textwrap.wrap(heading, width=120), "", *table]
    print("\n".join(lines))
    print(f"records: {records}")
    if section is not None:
        replace_section(Path(__file__).resolve().parent / "README.md", section, lines)
        print("bench/README.md updated")


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else math.nan


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "unsolved"
    return f"{value:,.{digits}f}"


def spread(values: list[float], digits: int = 0) -> str:
    """``median [min-max]``; unsolved runs count as infinitely slow."""
    if not values:
        return "-"
    return f"{fmt(median(values), digits)} [{fmt(min(values), digits)}-{fmt(max(values), digits)}]"


def ratio(ours: float, theirs: float) -> str:
    if any(math.isnan(v) or math.isinf(v) for v in (ours, theirs)) or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}"


def _select(records: list[dict], **conditions: Any) -> list[dict]:
    return [r for r in records if all(r.get(key) == value for key, value in conditions.items())]


def _one(records: list[dict], **conditions: Any) -> dict | None:
    found = _select(records, **conditions)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------- learning


def _learning_values(runs: list[dict], field: str) -> list[float]:
    return [math.inf if run[field] is None else float(run[field]) for run in runs]


LEARNING_ROWS: list[tuple[str, str, int]] = [
    ("environment steps to 475", "timesteps_to_threshold", 0),
    ("training seconds to 475", "seconds_to_threshold", 2),
    ("evaluation seconds (excluded)", "evaluation_seconds", 1),
    ("peak resident memory (MB)", "peak_rss_mb", 0),
]


def learning_table(records: list[dict]) -> tuple[str, dict[str, dict[str, float]]]:
    """The learning table and the medians by algorithm and field (for the targets)."""
    lines = ["| agent | figure | torchforce | SB3 | ratio tf/SB3 |", "|---|---|---|---|---|"]
    medians: dict[str, dict[str, float]] = {}
    for algorithm in ("ppo", "dqn"):
        ours = _select(records, kind="learning", library="torchforce", algorithm=algorithm)
        theirs = _select(records, kind="learning", library="sb3", algorithm=algorithm)
        if not ours and not theirs:
            continue
        solved = [f"{sum(run['solved'] for run in runs)}/{len(runs)}" for runs in (ours, theirs)]
        lines.append(f"| **{algorithm.upper()}** | runs that reached 475 | {solved[0]} | {solved[1]} | |")
        for label, field, digits in LEARNING_ROWS:
            a, b = _learning_values(ours, field), _learning_values(theirs, field)
            medians.setdefault(algorithm, {})[f"torchforce/{field}"] = median(a)
            medians[algorithm][f"sb3/{field}"] = median(b)
            lines.append(
                f"| {algorithm.upper()} | {label} | {spread(a, digits)} | {spread(b, digits)} "
                f"| {ratio(median(a), median(b))} |"
            )
    return "\n".join(lines), medians


# ---------------------------------------------------------------------------------------------- micro


def latency_table(records: list[dict]) -> str:
    lines = [
        "| agent | call | batch | torchforce median / p95 (µs) | SB3 median / p95 (µs) | SB3 call | SB3/tf |",
        "|---|---|---|---|---|---|---|",
    ]
    sb3_calls = {"act": "predict(deterministic=True)", "act_recording": "collection forward", "observe": "buffer add"}
    tf_calls = {"act": "act(independent=True)", "act_recording": "act (recording)", "observe": "observe"}
    for algorithm in ("ppo", "dqn"):
        for figure in ("act", "act_recording", "observe"):
            for batch in (1, 16):
                ours = _one(records, kind="micro", figure=figure, library="torchforce", agent=algorithm, batch=batch)
                theirs = _one(records, kind="micro", figure=figure, library="sb3", agent=algorithm, batch=batch)
                if ours is None:
                    continue
                b = theirs or {"median_us": math.nan, "p95_us": math.nan}
                lines.append(
                    f"| {algorithm.upper()} | {tf_calls[figure]} | {batch} | {ours['median_us']:.1f} / "
                    f"{ours['p95_us']:.1f} | {fmt(b['median_us'], 1)} / {fmt(b['p95_us'], 1)} | {sb3_calls[figure]} "
                    f"| {ratio(b['median_us'], ours['median_us'])}x |"
                )
    return "\n".join(lines)


CARTPOLE = "CartPole-v1"
HEAVY_SHARE = 0.9  # collection where the environment dominates: within 10% of Gymnasium's vectorized rate


def _collected(records: list[dict], environment: str, **conditions: Any) -> dict | None:
    """The collection record of ``environment`` that meets ``conditions`` (records of runs from before the
    ``environment`` key are CartPole's)."""
    found = [
        record
        for record in _select(records, kind="micro", figure="collection", **conditions)
        if record.get("environment", CARTPOLE) == environment
    ]
    return found[0] if found else None


def _rate_cell(record: dict | None, base: dict | None) -> str:
    """Steps/s, with its share of ``base``'s rate (Gymnasium's, in the same mode with as many copies)."""
    if record is None:
        return "-"
    value = record["steps_per_second"]
    share = "" if base is None else f" ({value / base['steps_per_second']:.0%})"
    return f"{value:,.0f}{share}"


def collection_table(records: list[dict]) -> str:
    """CartPole env steps/s by number of environments and mode; fractions are of Gymnasium's random-action rate in
    the same mode (Sync/AsyncVectorEnv with as many copies)."""
    lines = [
        "| envs | mode | Gymnasium random actions | torchforce Runner + PPO | torchforce Runner + random "
        "| SB3 PPO collect_rollouts | tf/SB3 |",
        "|---|---|---|---|---|---|---|",
    ]
    loop = _collected(records, CARTPOLE, library="gymnasium", mode="loop")
    for mode in ("sync", "subprocess"):
        for envs in (1, 8, 16):
            gym = _collected(records, CARTPOLE, library="gymnasium", mode=mode, envs=envs)
            ppo = _collected(records, CARTPOLE, what="runner + ppo", mode=mode, envs=envs)
            rnd = _collected(records, CARTPOLE, what="runner + random", mode=mode, envs=envs)
            sb3 = _collected(records, CARTPOLE, library="sb3", mode=mode, envs=envs)
            if gym is None and ppo is None:
                continue
            cells = " | ".join(_rate_cell(record, gym) for record in (gym, ppo, rnd, sb3))
            tf_sb3 = ratio(ppo["steps_per_second"], sb3["steps_per_second"]) if ppo and sb3 else "-"
            lines.append(f"| {envs} | {mode} | {cells} | {tf_sb3} |")
    if loop:
        lines.append(f"\nGymnasium, one environment in a bare `step` loop: {loop['steps_per_second']:,.0f} steps/s.")
    return "\n".join(lines)


def heavy_environments(records: list[dict]) -> list[str]:
    """The environments other than CartPole with collection records, in the order measured."""
    names = [record.get("environment", CARTPOLE) for record in _select(records, kind="micro", figure="collection")]
    return [name for name in dict.fromkeys(names) if name != CARTPOLE]


def heavy_collection_table(records: list[dict]) -> str:
    """Env steps/s where stepping the environment costs more than acting (MuJoCo, Atari); fractions are of
    Gymnasium's random-action rate in the same mode."""
    lines = [
        "| environment | envs | mode | Gymnasium random actions | torchforce Runner + random "
        "| torchforce Runner + PPO |",
        "|---|---|---|---|---|---|",
    ]
    for environment in heavy_environments(records):
        for mode in ("sync", "subprocess"):
            gym = _collected(records, environment, library="gymnasium", mode=mode)
            rnd = _collected(records, environment, what="runner + random", mode=mode)
            ppo = _collected(records, environment, what="runner + ppo", mode=mode)
            measured = gym or rnd or ppo
            if measured is None:
                continue
            cells = " | ".join(_rate_cell(record, gym) for record in (gym, rnd, ppo))
            lines.append(f"| {environment} | {measured['envs']} | {mode} | {cells} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- targets


def targets(records: list[dict], medians: dict[str, dict[str, float]]) -> str:
    rows: list[tuple[str, str, bool | None]] = []

    def check(name: str, value: str, met: bool | None) -> None:
        rows.append((name, value, met))

    ppo, dqn = medians.get("ppo"), medians.get("dqn")
    if ppo:
        time_ratio = ppo["torchforce/seconds_to_threshold"] / ppo["sb3/seconds_to_threshold"]
        steps = ppo["torchforce/timesteps_to_threshold"], ppo["sb3/timesteps_to_threshold"]
        check("PPO: median training seconds to 475 <= 0.5x SB3's", f"{time_ratio:.2f}x", time_ratio <= 0.5)
        check("PPO: median steps to 475 <= SB3's", f"{fmt(steps[0])} vs {fmt(steps[1])}", steps[0] <= steps[1])
        memory = ppo["torchforce/peak_rss_mb"], ppo["sb3/peak_rss_mb"]
        check("PPO: peak resident memory <= SB3's", f"{memory[0]:.0f} vs {memory[1]:.0f} MB", memory[0] <= memory[1])
    if dqn:
        time_ratio = dqn["torchforce/seconds_to_threshold"] / dqn["sb3/seconds_to_threshold"]
        check("DQN: median training seconds to 475 <= 0.5x SB3's", f"{time_ratio:.2f}x", time_ratio <= 0.5)
    ours = _one(records, kind="micro", figure="act", library="torchforce", agent="ppo", batch=1)
    theirs = _one(records, kind="micro", figure="act", library="sb3", agent="ppo", batch=1)
    if ours and theirs:
        check("act() one state: median < 100 µs", f"{ours['median_us']:.1f} µs", ours["median_us"] < 100)
        speedup = theirs["median_us"] / ours["median_us"]
        check("act() one state: >= 4x faster than SB3 predict()", f"{speedup:.1f}x", speedup >= 4)
    gym = _collected(records, CARTPOLE, library="gymnasium", mode="sync", envs=16)
    runner = _collected(records, CARTPOLE, what="runner + ppo", mode="sync", envs=16)
    if gym and runner:
        share = runner["steps_per_second"] / gym["steps_per_second"]
        check(
            "16-env CartPole collection >= 50% of Gymnasium's random-action rate (sync)", f"{share:.0%}", share >= 0.5
        )
    for environment in heavy_environments(records):
        for what, agent in (("runner + random", "random"), ("runner + ppo", "PPO")):
            shares = {}
            for mode in ("sync", "subprocess"):
                gym = _collected(records, environment, library="gymnasium", mode=mode)
                runner = _collected(records, environment, what=what, mode=mode)
                if gym and runner:
                    shares[mode] = runner["steps_per_second"] / gym["steps_per_second"]
            if shares:
                check(
                    f"{environment} collection, Runner + {agent}: >= {HEAVY_SHARE:.0%} of Gymnasium's rate",
                    ", ".join(f"{mode} {share:.0%}" for mode, share in shares.items()),
                    min(shares.values()) >= HEAVY_SHARE,
                )
    lines = ["| target | this run | met |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {'yes' if met else 'no'} |" for name, value, met in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- plots


def plot_curves(records: list[dict], algorithm: str, output: Path) -> Path | None:
    """Smoothed training-episode returns against steps and against training seconds, one line per run, with the
    evaluation means as markers; torchforce blue, SB3 orange."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchforce.client.aggregate import running_mean
    from torchforce.plots import label_steps, read_episode_log

    runs = _select(records, kind="learning", algorithm=algorithm)
    if not runs:
        return None
    figure, (by_steps, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    labelled: set[str] = set()
    for run in runs:
        path = Path(run["episode_log"])
        episodes = read_episode_log(path) if path.is_file() else []
        if not episodes:
            continue
        color = COLORS[run["library"]]
        label = None if run["library"] in labelled else NAMES[run["library"]]
        labelled.add(run["library"])
        returns = running_mean(np.array([e["return"] for e in episodes], dtype=float), 20)
        by_steps.plot([e["timesteps"] for e in episodes], returns, color=color, alpha=0.7, lw=1, label=label)
        by_time.plot([e["wall_time"] for e in episodes], returns, color=color, alpha=0.7, lw=1, label=label)
        for point in run["evaluations"]:
            by_steps.plot(point["timesteps"], point["mean_return"], "o", color=color, ms=3)
            by_time.plot(point["train_seconds"], point["mean_return"], "o", color=color, ms=3)
    for axis, label in ((by_steps, "environment steps"), (by_time, "training seconds (evaluation excluded)")):
        axis.axhline(475, color="gray", ls="--", lw=0.8)
        axis.set_xlabel(label)
        axis.set_ylabel("return (lines: training episodes, mean of 20; dots: evaluations)", fontsize=8)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    label_steps(by_steps)
    figure.suptitle(f"{algorithm.upper()} on CartPole-v1")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=80)
    plt.close(figure)
    return output


# ---------------------------------------------------------------------------------------------- tasks (MuJoCo, Atari)

TASKS_BEGIN, TASKS_END = "<!-- tasks:begin -->", "<!-- tasks:end -->"
# Student's t, 97.5% quantiles for 1 to 30 degrees of freedom (a two-sided 95% interval); beyond, the normal's 1.96
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131)
T_975 += (2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
TIME_TARGET = 0.7  # torchforce's total training seconds: at most this share of SB3's
# The zoo's published scores (DLR-RM/rl-baselines3-zoo logs/benchmark/benchmark.md, commit 0088472): one trained
# agent each, at the zoo's budget, evaluated for about 150,000 steps (deterministic policy, except Atari).
ZOO_SCORES: dict[str, tuple[str, float, str]] = {
    "halfcheetah_ppo": ("PPO HalfCheetah-v3", 5819.1, "1M steps"),
    "hopper_ppo": ("PPO Hopper-v3", 2410.4, "1M steps"),
    "pong_dqn": ("DQN PongNoFrameskip-v4", 20.6, "10M steps = 40M frames"),
    "breakout_dqn": ("DQN BreakoutNoFrameskip-v4", 358.3, "10M steps = 40M frames"),
    "pong_ppo": ("PPO PongNoFrameskip-v4", 21.0, "10M steps = 40M frames"),
    "breakout_ppo": ("PPO BreakoutNoFrameskip-v4", 398.0, "10M steps = 40M frames"),
}
ZOO_UNKNOWN = "unknown (the zoo's table has DDPG on HalfCheetahBulletEnv-v0 only)"


def zoo_score(name: str) -> tuple[str, float, str] | None:
    """The zoo's published score of task ``name``, or of the task a variant of it changes (``breakout_dqn_every8``,
    ``pong_ppo_float32``: the task's name and a suffix)."""
    tasks = [task for task in ZOO_SCORES if name == task or name.startswith(f"{task}_")]
    return ZOO_SCORES[max(tasks, key=len)] if tasks else None


def t_interval(values: Iterable[float]) -> tuple[float, float]:
    """The mean of ``values`` and the half-width of its 95% Student-t interval (nan from fewer than 2 values)."""
    values = [float(value) for value in values]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    quantile = T_975[len(values) - 2] if len(values) - 1 <= len(T_975) else 1.96
    return mean, quantile * statistics.stdev(values) / math.sqrt(len(values))


def time_to_threshold(
    points: list[tuple[int, float, float]], threshold: float, smoothing: int
) -> tuple[int, float] | None:
    """The steps and seconds of the first episode at which the mean of the last ``smoothing`` returns (a full
    window) is at least ``threshold``, or None. ``points``: ``(steps, seconds, return)`` per episode, in order."""
    from torchforce.client.aggregate import first_crossing, running_mean

    smoothed = running_mean(np.array([point[2] for point in points], dtype=float), smoothing)
    smoothed[: smoothing - 1] = -np.inf
    index = first_crossing(smoothed, threshold)
    return None if index is None else (int(points[index][0]), float(points[index][1]))


def curves_on_grid(
    runs: list[list[tuple[int, float, float]]], axis: int, smoothing: int, points: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Runs' returns, smoothed over ``smoothing`` episodes, on one grid of steps (``axis`` 0) or seconds (1) that
    spans what every run covers, interpolated linearly between episodes: the grid and one row per run."""
    from torchforce.client.aggregate import aligned, running_mean

    curves = [
        (np.array([p[axis] for p in run], dtype=float), running_mean(np.array([p[2] for p in run], float), smoothing))
        for run in runs
        if run
    ]
    return aligned(curves, points)


def _mean_and_half(values: list[float]) -> str:
    mean, half = t_interval(values)
    if math.isnan(mean):
        return "-"
    digits = 1 if abs(mean) < 100 else 0
    return fmt(mean, digits) + ("" if math.isnan(half) else f" ± {fmt(half, digits)}")


def _reached(runs: list[dict], field: str, digits: int) -> str:
    """The median over the runs that reached the threshold, and how many did."""
    values = [float(run[field]) for run in runs if run[field] is not None]
    return f"{fmt(median(values), digits)} ({len(values)}/{len(runs)})"


def _means(runs: list[dict], field: str) -> float:
    values = [float(run[field]) for run in runs if run[field] is not None]
    return sum(values) / len(values) if values else math.nan


def task_table(name: str, runs: list[dict]) -> str:
    """One task's table: torchforce against SB3 (and the zoo's published score)."""
    ours = [run for run in runs if run["library"] == "torchforce" and run["error"] is None]
    theirs = [run for run in runs if run["library"] == "sb3" and run["error"] is None]
    first = runs[0]
    goal = fmt(first["threshold"], 0 if abs(first["threshold"]) >= 100 else 1)
    lines = ["| figure | torchforce | SB3 | ratio tf/SB3 |", "|---|---|---|---|"]
    finals = [[run["final_return"] for run in side if run["final_return"] is not None] for side in (ours, theirs)]
    lines.append(
        f"| final return (last {first['window']} {'games' if first['atari'] else 'episodes'}), mean ± 95% CI "
        f"| {_mean_and_half(finals[0])} | {_mean_and_half(finals[1])} | |"
    )
    for label, field, digits in (
        ("environment steps", "steps_to_threshold", 0),
        ("seconds", "seconds_to_threshold", 1),
    ):
        a, b = _reached(ours, field, digits), _reached(theirs, field, digits)
        lines.append(f"| {label} to {goal} (median of runs reaching it) | {a} | {b} | |")
    for label, field in (
        ("total training seconds (mean)", "train_seconds"),
        ("environment steps per second (mean)", "steps_per_second"),
        ("peak resident memory, MB (mean)", "peak_rss_mb"),
    ):
        a, b = _means(ours, field), _means(theirs, field)
        known = [value for value in (a, b) if not math.isnan(value)]
        digits = 1 if known and max(known) < 100 else 0
        lines.append(f"| {label} | {fmt(a, digits)} | {fmt(b, digits)} | {ratio(a, b)} |")
    zoo = zoo_score(name)
    published = ZOO_UNKNOWN if zoo is None else f"{fmt(zoo[1], 1)} ({zoo[0]}, {zoo[2]}, one run)"
    lines.append(f"| the zoo's published score, at its budget | | {published} | |")
    failed = [f"{run['library']} seed {run['seed']}" for run in runs if run["error"] is not None]
    if failed:
        lines.append(f"\nFailed runs (left out above): {', '.join(failed)}.")
    return "\n".join(lines)


def task_targets(tasks: dict[str, list[dict]]) -> str:
    lines = ["| task | target | this run | met |", "|---|---|---|---|"]
    for name, runs in tasks.items():
        ours = [run for run in runs if run["library"] == "torchforce" and run["error"] is None]
        theirs = [run for run in runs if run["library"] == "sb3" and run["error"] is None]
        final = _means(ours, "final_return"), _means(theirs, "final_return")
        seconds = _means(ours, "train_seconds"), _means(theirs, "train_seconds")
        known = not any(math.isnan(value) for value in final)
        met = "yes" if known and final[0] >= final[1] else "no" if known else "-"
        lines.append(f"| {name} | final return >= SB3's | {fmt(final[0], 1)} vs {fmt(final[1], 1)} | {met} |")
        share = seconds[0] / seconds[1] if seconds[1] else math.nan
        shown, met = ("-", "-") if math.isnan(share) else (f"{share:.2f}x", "yes" if share <= TIME_TARGET else "no")
        lines.append(f"| {name} | wall-clock <= {TIME_TARGET}x SB3's | {shown} | {met} |")
    return "\n".join(lines)


def plot_task(name: str, runs: list[dict], output: Path) -> Path | None:
    """Return against environment steps and against training seconds: per library the mean over seeds of the
    returns smoothed over ``smoothing`` episodes, in the 95% bootstrap band of that mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchforce.client.aggregate import bootstrap_band
    from torchforce.plots import label_steps, read_episode_log

    first = runs[0]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    drawn = False
    for library in ("torchforce", "sb3"):
        curves = []
        for run in runs:
            path = Path(run["curve"])
            if run["library"] == library and run["error"] is None and path.is_file():
                curves.append([(e["timesteps"], e["wall_time"], e["return"]) for e in read_episode_log(path)])
        for index, axis in enumerate(axes):
            grid, matrix = curves_on_grid(curves, index, first["smoothing"])
            if not grid.size:
                continue
            mean, low, high = bootstrap_band(matrix)
            label = f"{NAMES[library]} ({len(matrix)} seed{'s' if len(matrix) != 1 else ''})"
            axis.plot(grid, mean, color=COLORS[library], lw=1.2, label=label)
            axis.fill_between(grid, low, high, color=COLORS[library], alpha=0.2, linewidth=0)
            drawn = True
    if not drawn:
        plt.close(figure)
        return None
    unit = "games" if first["atari"] else "episodes"
    for axis, label in zip(axes, ("environment steps", "training seconds"), strict=True):
        axis.axhline(first["threshold"], color="gray", ls="--", lw=0.8)
        axis.set_xlabel(label)
        axis.set_ylabel(f"return, mean of the last {first['smoothing']} {unit}", fontsize=8)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right", fontsize="small")
    label_steps(axes[0])
    figure.suptitle(f"{name}: mean over seeds, 95% bootstrap band; budget {first['budget']:,} steps", fontsize=10)
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=80)
    plt.close(figure)
    return output


def render_tasks(records: list[dict], plots: Path, relative_to: Path | None) -> str:
    """The tasks' markdown, between ``TASKS_BEGIN`` and ``TASKS_END``; the plots written to ``plots``."""
    meta = _one(records, kind="meta") or {}
    tasks: dict[str, list[dict]] = {}
    for run in _select(records, kind="task"):
        tasks.setdefault(run["task"], []).append(run)
    budgets = ", ".join(f"{name} {runs[0]['budget']:,}" for name, runs in tasks.items())
    heading = f"Runs {meta['runs']}" if meta.get("runs") else f"Run `{meta.get('run', '?')}` of {meta.get('date', '?')}"
    parts = [
        f"{heading}{' (--quick)' if meta.get('quick') else ''}: seeds "
        f"{meta.get('seeds')}, device {meta.get('device', 'cpu')}, one torch thread for both libraries; environment "
        f"steps per run (all copies together): {budgets}. torchforce trains the shipped experiment as its worker "
        "builds it (without checkpoints, summaries and evaluation rounds), SB3 the zoo's entry on the same "
        "environment. The final return is the mean return of the last training episodes of a run (Atari: real "
        "games, the unclipped score; all of them where a run had fewer); the table gives its mean over seeds ± the "
        "half-width of the 95% Student-t interval. A threshold is reached at the first episode at which the mean of "
        "the last 10 reaches it. Seconds are training seconds (building the agent and environments excluded). "
        "Plots: per library the mean over seeds of the return smoothed over 10 episodes (games), in the 95% "
        "bootstrap band of that mean."
    ]
    for name, runs in tasks.items():
        body = task_table(name, runs)
        settings = {run["library"]: f"{NAMES[run['library']]}: {run['settings']}" for run in runs if run["settings"]}
        body += "\n\n" + "; ".join(settings[library] for library in ("torchforce", "sb3") if library in settings)
        body += "." + (f" {runs[0]['note']}." if runs[0]["note"] else "")
        image = plot_task(name, runs, plots / f"{name}.png")
        if image is not None:
            shown = image.relative_to(relative_to) if relative_to and image.is_relative_to(relative_to) else image
            body += f"\n\n![{name}]({shown})"
        parts.append(f"### {name}\n\n{body}")
    for name, reason in (meta.get("unavailable") or {}).items():
        parts.append(f"### {name}\n\nNot run: {reason}.")
    if tasks:
        parts.append(f"### Targets\n\n{task_targets(tasks)}")
    return f"{TASKS_BEGIN}\n" + "\n\n".join(parts) + f"\n{TASKS_END}\n"


# ---------------------------------------------------------------------------------------------- the report


def render(records: list[dict], plots: dict[str, Path], relative_to: Path | None) -> str:
    meta = _one(records, kind="meta") or {}
    info = meta.get("machine", {})
    versions = ", ".join(f"{name} {version}" for name, version in info.get("versions", {}).items())
    parts = [
        f"Run `{meta.get('run', '?')}` of {meta.get('date', '?')}{' (--quick)' if meta.get('quick') else ''}, "
        f"seeds {meta.get('seeds')}. Machine: {info.get('cpu', '?')}, {info.get('cores', '?')} cores, "
        f"{info.get('system', '?')}, Python {info.get('python', '?')}; {versions}; 1 torch thread for both "
        "libraries. Ratios are torchforce/SB3 of the medians (below 1: torchforce needs less)."
    ]
    section: Callable[[str, str], None] = lambda title, body: parts.append(f"### {title}\n\n{body}")  # noqa: E731
    table, medians = learning_table(records)
    if medians:
        section("Learning: CartPole-v1 to a deterministic mean return of 475 over 20 episodes", table)
        images = []
        for algorithm, path in plots.items():
            shown = path.relative_to(relative_to) if relative_to else path
            images.append(f"![{algorithm.upper()} learning curves]({shown})")
        if images:
            parts.append("\n\n".join(images))
    if _select(records, kind="micro"):
        section(
            "Acting and observing (one environment's worth of calls; medians over many calls)", latency_table(records)
        )
        section(
            "Collection: environment steps per second (acting and recording, no learning updates)",
            collection_table(records),
        )
        if heavy_environments(records):
            section(
                "Collection where the environment dominates: steps per second (MuJoCo, Atari; no learning updates)",
                heavy_collection_table(records),
            )
    section("Targets", targets(records, medians))
    return "\n\n".join(parts) + "\n"


def write(records: list[dict], *, plots: Path, readme: Path | None = None, task_plots: Path | None = None) -> str:
    """Write the PNGs to ``plots`` (the tasks' to ``task_plots``, default ``plots``); with ``readme``, replace its
    results section. Returns the markdown: the CartPole part and the tasks' block, each where there are records."""
    made = {}
    for algorithm in ("ppo", "dqn") if _select(records, kind="learning") else ():
        path = plot_curves(records, algorithm, plots / f"{algorithm}_curves.png")
        if path is not None:
            made[algorithm] = path
    cartpole = _select(records, kind="learning") or _select(records, kind="micro")
    text = render(records, made, readme.parent if readme else None) if cartpole else ""
    if readme is not None:
        content = readme.read_text()
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        readme.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}{END}", content))
    if _select(records, kind="task") or (_one(records, kind="meta") or {}).get("unavailable"):
        text += render_tasks(records, task_plots or plots, Path(__file__).resolve().parent)
    return text


def merged(runs: list[list[dict]]) -> list[dict]:
    """The records of several task runs as one: their tasks under one meta record that names each run with its date
    and seeds (the first run's otherwise). Refused: runs other than of tasks, runs of other devices or budgets, a
    task whose settings differ between runs, and the same seed of a task and library in two runs (it would count
    as two seeds), unless the earlier one failed: the later one replaces it."""
    if len(runs) == 1:
        return runs[0]
    metas = [_one(records, kind="meta") or {} for records in runs]
    for meta, records in zip(metas, runs, strict=True):
        others = {record.get("kind") for record in records} - {"meta", "task"}
        if others or meta.get("quick"):
            what = "a --quick run" if meta.get("quick") else f"{', '.join(sorted(map(str, others)))} records"
            raise ValueError(f"only task runs report together; run {meta.get('run')} has {what}")
        for key in ("device", "steps"):
            if meta.get(key) != metas[0].get(key):
                raise ValueError(
                    f"run {meta.get('run')} has {key} {meta.get(key)}, run {metas[0].get('run')} {metas[0].get(key)}"
                )
    tasks: dict[tuple[str, str, int], tuple[dict, str]] = {}
    settings: dict[tuple[str, str], tuple[Any, ...]] = {}
    for meta, records in zip(metas, runs, strict=True):
        for record in _select(records, kind="task"):
            key = (record["task"], record["library"], record["seed"])
            same = (record["budget"], record["settings"], record["threshold"], record["window"])
            if settings.setdefault(key[:2], same) != same:
                raise ValueError(f"{key[0]} {key[1]}: run {meta.get('run')} has other settings or budget")
            earlier = tasks.get(key)
            if earlier is not None and not earlier[0].get("error"):
                raise ValueError(f"{key[0]} {key[1]} seed {key[2]} is in run {earlier[1]} and in run {meta.get('run')}")
            tasks[key] = record, str(meta.get("run"))
    described = " and ".join(
        f"`{meta.get('run', '?')}` of {meta.get('date', '?')} (seeds {meta.get('seeds')})" for meta in metas
    )
    together = {
        "run": " + ".join(str(meta.get("run", "?")) for meta in metas),
        "date": " and ".join(str(meta.get("date", "?")) for meta in metas),
        "seeds": sorted({seed for meta in metas for seed in meta.get("seeds") or []}),
        "runs": described,
        "unavailable": {name: why for meta in metas for name, why in (meta.get("unavailable") or {}).items()},
    }
    return [{**metas[0], **together}, *(record for record, _ in tasks.values())]


def main() -> None:
    parser = argparse.ArgumentParser(description="The benchmark report of one run's records, or of task runs together")
    parser.add_argument("results", nargs="+", type=Path, help="RESULTS.jsonl files (later seeds: --first-seed)")
    parser.add_argument("--plots", type=Path, help="where the plots go (default: beside the last file's records)")
    arguments = parser.parse_args()
    runs = [[json.loads(line) for line in path.read_text().splitlines() if line.strip()] for path in arguments.results]
    try:
        records = merged(runs)
    except ValueError as error:
        parser.exit(2, f"report.py: {error}\n")
    plots = (arguments.plots or arguments.results[-1].with_suffix("")).resolve()
    print(write(records, plots=plots, task_plots=plots))


if __name__ == "__main__":
    main()
