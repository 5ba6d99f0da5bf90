"""Start-up: how long tfcli takes to answer, to check a new experiment, and a local worker to run a short one, with
torch's compiler imported as torch.optim would (``torch``) and without it (``skipped``, what tfcli does).

    .venv/bin/python bench/startup.py                 # 5 repeats; updates bench/README.md
    .venv/bin/python bench/startup.py --repeats 1 --no-readme

torch.optim imports its compiler (``torch._dynamo``) the first time an optimizer is built, only to mark some of its
methods as never compiled. tfcli's spec checks and its workers compile nothing, so they build and train inside
``without_the_compiler`` (``torchforce.core.optimizers.torch_optimizers``); the ``torch`` points replace it with a
block that does nothing. Each point is a fresh process timed from outside, in a project made for the run:

- ``help``: ``tfcli --help`` (Python, the command line's imports; no torch, so timed once a repeat);
- ``new``: ``tfcli experiment new -A vpg_cartpole -E cartpole`` (imports torch, builds the environment and agent);
- ``worker``: the local worker running a new ``ppo_cartpole`` experiment of 500 steps to its end (imports, builds,
  runs, checkpoints, writes its results).

Points run round-robin, repeat by repeat. Records go to ``bench/results/startup-<time>.jsonl``; a run with the
default settings replaces the section between the ``startup`` markers of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("torch", "skipped")
DEFAULTS = {"repeats": 5}
# runs a module as ``python -m`` would; in the ``torch`` mode, without_the_compiler first becomes a no-op block
LAUNCH = """
import contextlib, runpy, sys
if sys.argv[1] == "torch":
    import torchforce.core.optimizers.torch_optimizers as optimizers
    optimizers.without_the_compiler = contextlib.nullcontext
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def timed(mode: str, module: str, *arguments: str, cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, mode, module, *arguments], cwd=cwd, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(arguments)} ({mode}) failed:\n{done.stderr[-3000:]}")
    return seconds


def tfcli(root: Path, *arguments: str) -> None:
    done = subprocess.run([sys.executable, "-m", "torchforce", *arguments], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tfcli {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")


def points(root: Path, repeat: int) -> list[dict]:
    """Every point of one repeat, each mode in turn."""
    # --help imports no torch: the same in both modes (the torch mode's patch would import torch before it)
    records = [{"point": "help", "mode": "skipped", "seconds": timed("skipped", "torchforce", "--help", cwd=root)}]
    for mode in MODES:
        name = f"{mode}-{repeat}"
        new = ("experiment", "new", "-n", f"new-{name}", "-A", "vpg_cartpole", "-E", "cartpole")
        records.append({"point": "new", "mode": mode, "seconds": timed(mode, "torchforce", *new, cwd=root)})
        tfcli(root, "experiment", "new", "-n", f"run-{name}", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "500")
        folder = str(root / "experiments" / f"run-{name}")
        records.append(
            {"point": "worker", "mode": mode, "seconds": timed(mode, "torchforce.client.worker", folder, cwd=root)}
        )
    return records


LABELS = {
    "help": "`tfcli --help`",
    "new": "`tfcli experiment new` (vpg_cartpole)",
    "worker": "a local worker, 500 PPO steps",
}


def table(records: list[dict]) -> list[str]:
    lines = [
        "| what | torch's compiler imported: s, median [min-max] | skipped (tfcli): s, median [min-max] | saved |",
        "|---|---|---|---|",
    ]
    for point, label in LABELS.items():
        cells, medians = [], {}
        for mode in MODES:
            seconds = [r["seconds"] for r in records if r["point"] == point and r["mode"] == mode]
            if not seconds:  # --help: one mode only
                cells.append("the same (no torch)")
                continue
            medians[mode] = statistics.median(seconds)
            cells.append(f"{medians[mode]:.2f} [{min(seconds):.2f}-{max(seconds):.2f}]")
        saved = f"{medians['torch'] - medians['skipped']:.2f} s" if len(medians) == 2 else "-"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {saved} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=DEFAULTS["repeats"], help="runs per point (median reported)")
    parser.add_argument("--no-readme", action="store_true", help="leave bench/README.md as it is")
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE / "results" / f"startup-{stamp}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tf-startup-")) / "project"
    root.mkdir()
    records = []
    try:
        tfcli(root, "init")
        with out.open("w") as handle:
            for repeat in range(args.repeats):
                for record in points(root, repeat):
                    record = {"run": stamp, "repeat": repeat, **record}
                    records.append(record)
                    handle.write(json.dumps(record) + "\n")
                    handle.flush()
                    print(f"repeat {repeat}: {record['point']:<6} {record['mode']:<7} {record['seconds']:6.2f} s")
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
    from report import publish

    update = not args.no_readme and args.repeats == DEFAULTS["repeats"]
    publish(f"Run `{stamp}`: {args.repeats} runs a point", table(records), out, "startup" if update else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
