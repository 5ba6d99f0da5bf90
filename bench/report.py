"""The benchmark report: markdown tables (median and range over seeds, ratio torchforce/SB3, targets) and the
learning-curve PNGs, from the records of one run. ``python bench/report.py RESULTS.jsonl`` prints it again.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
NAMES = {"torchforce": "torchforce", "sb3": "SB3", "gymnasium": "Gymnasium"}
COLORS = {"torchforce": "tab:blue", "sb3": "tab:orange"}


# ---------------------------------------------------------------------------------------------- numbers


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


def collection_table(records: list[dict]) -> str:
    """Env steps/s by number of environments and mode; fractions are of Gymnasium's random-action rate in the
    same mode (Sync/AsyncVectorEnv with as many copies)."""
    lines = [
        "| envs | mode | Gymnasium random actions | torchforce Runner + PPO | torchforce Runner + random "
        "| SB3 PPO collect_rollouts | tf/SB3 |",
        "|---|---|---|---|---|---|---|",
    ]
    loop = _one(records, kind="micro", figure="collection", library="gymnasium", mode="loop")
    for mode in ("sync", "subprocess"):
        for envs in (1, 8, 16):
            gym = _one(records, kind="micro", figure="collection", library="gymnasium", mode=mode, envs=envs)
            ppo = _one(records, kind="micro", figure="collection", what="runner + ppo", mode=mode, envs=envs)
            rnd = _one(records, kind="micro", figure="collection", what="runner + random", mode=mode, envs=envs)
            sb3 = _one(records, kind="micro", figure="collection", library="sb3", mode=mode, envs=envs)
            if gym is None and ppo is None:
                continue
            base = gym["steps_per_second"] if gym else math.nan

            def cell(record: dict | None, base: float = base) -> str:
                if record is None:
                    return "-"
                value = record["steps_per_second"]
                share = "" if math.isnan(base) else f" ({value / base:.0%})"
                return f"{value:,.0f}{share}"

            tf_sb3 = ratio(ppo["steps_per_second"], sb3["steps_per_second"]) if ppo and sb3 else "-"
            lines.append(f"| {envs} | {mode} | {cell(gym)} | {cell(ppo)} | {cell(rnd)} | {cell(sb3)} | {tf_sb3} |")
    if loop:
        lines.append(f"\nGymnasium, one environment in a bare `step` loop: {loop['steps_per_second']:,.0f} steps/s.")
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
    gym = _one(records, kind="micro", figure="collection", library="gymnasium", mode="sync", envs=16)
    runner = _one(records, kind="micro", figure="collection", what="runner + ppo", mode="sync", envs=16)
    if gym and runner:
        share = runner["steps_per_second"] / gym["steps_per_second"]
        check("16-env collection >= 40% of Gymnasium's random-action rate (sync)", f"{share:.0%}", share >= 0.4)
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

    from torchforce.plots import read_episode_log, smooth

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
        returns = smooth(np.array([e["return"] for e in episodes], dtype=float), 20)
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
    figure.suptitle(f"{algorithm.upper()} on CartPole-v1")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=80)
    plt.close(figure)
    return output


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
    section("Targets", targets(records, medians))
    return "\n\n".join(parts) + "\n"


def write(records: list[dict], *, plots: Path, readme: Path | None = None) -> str:
    """Write the PNGs to ``plots``; with ``readme``, replace its results section. Returns the markdown."""
    made = {}
    for algorithm in ("ppo", "dqn"):
        path = plot_curves(records, algorithm, plots / f"{algorithm}_curves.png")
        if path is not None:
            made[algorithm] = path
    text = render(records, made, readme.parent if readme else None)
    if readme is not None:
        content = readme.read_text()
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        readme.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}{END}", content))
    return text


def main() -> None:
    path = Path(sys.argv[1])
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(write(records, plots=path.with_suffix("")))


if __name__ == "__main__":
    main()
