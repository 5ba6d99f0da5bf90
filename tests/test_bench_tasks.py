"""The statistics of the MuJoCo/Atari benchmark report (bench/report.py): the Student-t interval over seeds, the
time to a return threshold, curves of several runs on one grid, and the tables' figures, against hand values."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchforce.agents.compute
import torchforce.core.networks
from tests.bench_modules import BENCH, bench_module


@pytest.fixture(scope="module")
def report():
    return bench_module("report")


def test_t_interval_is_the_mean_and_the_student_t_half_width(report):
    mean, half = report.t_interval([1.0, 2.0, 3.0])  # s = 1, t(0.975, 2 df) = 4.303
    assert mean == 2.0
    assert half == pytest.approx(4.303 / math.sqrt(3))
    mean, half = report.t_interval([0.0, 2.0])  # s = sqrt(2), t(0.975, 1 df) = 12.706
    assert (mean, half) == (1.0, pytest.approx(12.706))
    assert report.t_interval([5.0])[0] == 5.0 and math.isnan(report.t_interval([5.0])[1])
    assert all(math.isnan(value) for value in report.t_interval([]))
    # beyond 30 degrees of freedom: the normal's 1.96
    values = [0.0, 1.0] * 20
    assert report.t_interval(values)[1] == pytest.approx(1.96 * np.std(values, ddof=1) / math.sqrt(40))


def test_time_to_threshold_needs_a_full_window_of_episodes(report):
    points = [(100 * (i + 1), 0.5 * (i + 1), float(value)) for i, value in enumerate([0, 10, 20, 30, 40])]
    # means of the last 2: -, 5, 15, 25, 35: the fourth episode is the first at 25
    assert report.time_to_threshold(points, 25.0, 2) == (400, 2.0)
    assert report.time_to_threshold(points, 36.0, 2) is None
    lucky_start = [(10, 1.0, 100.0), (20, 2.0, 0.0), (30, 3.0, 0.0)]
    assert report.time_to_threshold(lucky_start, 50.0, 3) is None  # one lucky episode is no full window
    assert report.time_to_threshold(lucky_start, 50.0, 1) == (10, 1.0)


def test_a_variant_is_reported_beside_its_tasks_published_score(report):
    breakout = report.ZOO_SCORES["breakout_dqn"]
    assert [report.zoo_score(name) for name in ("breakout_dqn", "breakout_dqn_every8", "breakout_dqn_bfloat16")] == [
        breakout
    ] * 3
    assert report.zoo_score("pong_ppo_float32") == report.ZOO_SCORES["pong_ppo"]
    assert report.zoo_score("halfcheetah_ddpg_400") is None and report.zoo_score("breakout") is None
    assert report.time_to_threshold([], 0.0, 10) is None


def test_curves_on_grid_span_what_every_run_covers(report):
    first = [(0, 0.0, 0.0), (10, 1.0, 10.0), (20, 2.0, 20.0)]
    second = [(5, 4.0, 1.0), (15, 8.0, 1.0), (30, 12.0, 1.0)]
    grid, matrix = report.curves_on_grid([first, second], 0, 1, points=4)
    assert grid.tolist() == [5.0, 10.0, 15.0, 20.0]  # from the latest first step to the earliest last one
    assert matrix.tolist() == [[5.0, 10.0, 15.0, 20.0], [1.0, 1.0, 1.0, 1.0]]
    # smoothed over 2 episodes first (0, 5, 15 at steps 0, 10, 20), then interpolated
    _, smoothed = report.curves_on_grid([first], 0, 2, points=3)
    assert smoothed.tolist() == [[0.0, 5.0, 15.0]]
    # by seconds: the runs' seconds do not overlap (0-2 against 4-12): no common grid
    grid, matrix = report.curves_on_grid([first, second], 1, 1)
    assert grid.size == 0 and matrix.shape == (2, 0)


def run(library, seed, final, seconds, reached=None, error=None):
    return {
        "task": "hopper_ppo",
        "library": library,
        "seed": seed,
        "budget": 50_000,
        "threshold": 1000.0,
        "window": 100,
        "smoothing": 10,
        "atari": False,
        "note": "",
        "curve": "/nonexistent/curve.jsonl",
        "settings": "the settings",
        "error": error,
        "final_return": final,
        "train_seconds": seconds,
        "steps_per_second": None if seconds is None else 50_000 / seconds,
        "peak_rss_mb": 300.0,
        "steps_to_threshold": None if reached is None else reached[0],
        "seconds_to_threshold": None if reached is None else reached[1],
    }


def test_task_table_and_targets(report):
    runs = [
        run("torchforce", 0, 1100.0, 70.0, reached=(20_000, 30.0)),
        run("torchforce", 1, 1300.0, 70.0, reached=(40_000, 50.0)),
        run("torchforce", 2, 1200.0, 70.0),
        run("sb3", 0, 1000.0, 100.0, reached=(30_000, 60.0)),
        run("sb3", 1, 1000.0, 100.0),
        run("sb3", 2, 1000.0, 100.0),
        run("sb3", 3, None, None, error="exit 1"),
    ]
    lines = report.task_table("hopper_ppo", runs).splitlines()
    half = 4.303 * 100.0 / math.sqrt(3)  # 1100, 1300, 1200: s = 100
    assert f"| 1,200 ± {half:,.0f} | 1,000 ± 0 |" in lines[2]
    assert lines[3] == "| environment steps to 1,000 (median of runs reaching it) | 30,000 (2/3) | 30,000 (1/3) | |"
    assert lines[4] == "| seconds to 1,000 (median of runs reaching it) | 40.0 (2/3) | 60.0 (1/3) | |"
    assert lines[5] == "| total training seconds (mean) | 70 | 100 | 0.70 |"
    assert "| the zoo's published score, at its budget | | 2,410.4 (PPO Hopper-v3, 1M steps, one run) | |" in lines
    assert lines[-1] == "Failed runs (left out above): sb3 seed 3."
    for name in ("hopper_ppo_bfloat16", "hopper_ppo_compiled"):  # a variant: its task's published score
        variant = report.task_table(name, runs).splitlines()
        assert (
            "| the zoo's published score, at its budget | | 2,410.4 (PPO Hopper-v3, 1M steps, one run) | |" in variant
        )
    targets = report.task_targets({"hopper_ppo": runs}).splitlines()
    assert targets[2:] == [
        "| hopper_ppo | final return >= SB3's | 1,200.0 vs 1,000.0 | yes |",
        "| hopper_ppo | wall-clock <= 0.7x SB3's | 0.70x | yes |",
    ]


def test_the_tasks_block_says_which_tasks_did_not_run(report, tmp_path):
    meta = {"kind": "meta", "run": "r1", "date": "d", "seeds": [0], "unavailable": {"pong_dqn": "no config"}}
    text = report.render_tasks([meta, {"kind": "task", **run("torchforce", 0, 1.0, 1.0)}], tmp_path, None)
    assert text.startswith(report.TASKS_BEGIN) and text.endswith(report.TASKS_END + "\n")
    assert "### hopper_ppo" in text and "### pong_dqn\n\nNot run: no config." in text
    assert list(tmp_path.iterdir()) == []  # no curve to draw: no plot


@pytest.mark.slow
def test_the_harness_runs_both_libraries_at_once(tmp_path):
    """``run.py --only tasks --jobs 2``: torchforce and SB3 train side by side in two processes, and both records
    come back, in plan order, each with its own episodes; nothing is left in the temp directory."""
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("mujoco")
    command = [sys.executable, str(BENCH / "run.py"), "--only", "tasks", "--tasks", "hopper_ppo", "--quick"]
    out = tmp_path / "out"
    command += ["--steps", "1500", "--jobs", "2", "--out", str(out)]
    temp = tmp_path / "temp"
    temp.mkdir()
    environment = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # e.g. no SB3-<date> folder from SB3's logger (torch's compile cache, one per user, is kept on purpose)
    assert sorted(path.name for path in temp.iterdir() if not path.name.startswith("torchinductor_")) == []
    (results,) = out.glob("*.jsonl")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    runs = [record for record in records if record["kind"] == "task"]
    assert [(run["library"], run["error"]) for run in runs] == [("torchforce", None), ("sb3", None)]
    for run in runs:
        assert run["steps"] >= 1500 and run["episodes"] > 0 and run["final_return"] is not None
        assert len(Path(run["curve"]).read_text().splitlines()) == run["episodes"]


def test_runs_of_other_days_report_together_and_a_seed_counts_once(report, tmp_path):
    def task_run(name, seeds, *tasks):
        return [{"kind": "meta", "run": name, "date": f"{name} date", "seeds": seeds, "device": "cpu"}, *tasks]

    first = task_run("r1", [0], {"kind": "task", **run("torchforce", 0, 1100.0, 70.0)})
    first.append({"kind": "task", **run("sb3", 0, 1000.0, 100.0)})
    later = task_run("r2", [1], {"kind": "task", **run("torchforce", 1, 1300.0, 70.0)})
    later.append({"kind": "task", **run("sb3", 1, 1000.0, 100.0)})
    records = report.merged([first, later])
    assert [record["kind"] for record in records] == ["meta", "task", "task", "task", "task"]
    assert records[0]["seeds"] == [0, 1] and records[0]["run"] == "r1 + r2"
    text = report.render_tasks(records, tmp_path, None)
    assert "Runs `r1` of r1 date (seeds [0]) and `r2` of r2 date (seeds [1]): seeds [0, 1]" in text
    assert f"| 1,200 ± {12.706 * 100.0:,.0f} |" in text  # 1100 and 1300: s = 141.4, t(0.975, 1 df) = 12.706
    assert report.merged([first]) == first

    with pytest.raises(ValueError, match="hopper_ppo torchforce seed 1 is in run r2 and in run r3"):
        report.merged([first, later, task_run("r3", [1], {"kind": "task", **run("torchforce", 1, 1.0, 1.0)})])
    failed = task_run("r0", [1], {"kind": "task", **run("torchforce", 1, None, None, error="exit 1")})
    assert len(report.merged([failed, first, later])) == 5  # a failed seed is run again: the later run replaces it
    other_budget = task_run("r3", [2], {"kind": "task", **run("torchforce", 2, 1.0, 1.0), "budget": 5})
    with pytest.raises(ValueError, match="hopper_ppo torchforce: run r3 has other settings or budget"):
        report.merged([first, other_budget])
    with pytest.raises(ValueError, match="run r3 has device cuda, run r1 cpu"):
        report.merged([first, [{**later[0], "run": "r3", "device": "cuda"}, *later[1:]]])
    with pytest.raises(ValueError, match="only task runs report together; run r3 has learning records"):
        report.merged([first, task_run("r3", [1], {"kind": "learning", "seed": 1})])


def test_a_variant_changes_the_shipped_agent_and_runs_only_when_named(monkeypatch):
    """``breakout_ppo_bfloat16`` is the shipped ``breakout_ppo`` with the agent's ``mixed_precision`` set, and
    ``run.py`` trains it only when named: the default set is the shipped experiments."""
    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("tasks", "run"):  # dataclasses look their module up in sys.modules: there for this test only
        monkeypatch.setitem(sys.modules, f"bench_{name}", None)
    tasks, run = (bench_module(name, sys.modules) for name in ("tasks", "run"))
    shipped = tasks.experiment(tasks.TASKS["breakout_ppo"])
    variant = tasks.experiment(tasks.TASKS["breakout_ppo_bfloat16"])
    assert variant["agent"] == {**shipped["agent"], "mixed_precision": "bfloat16"}
    assert {**variant, "agent": None} == {**shipped, "agent": None}
    names, _ = run.task_names(None)
    assert "breakout_ppo" in names and not [name for name in names if name.endswith("_bfloat16")]
    assert "halfcheetah_naf" in names and "halfcheetah_naf_narrowing" not in names
    naf, narrowing = (tasks.experiment(tasks.TASKS[name]) for name in ("halfcheetah_naf", "halfcheetah_naf_narrowing"))
    changed = {key for key in naf["agent"] if naf["agent"][key] != narrowing["agent"][key]}
    assert changed == {"optimizer", "actions_exploration"} and narrowing["agent"]["optimizer"]["learning_rate"] == 1e-3
    compiled = tasks.experiment(tasks.TASKS["halfcheetah_ppo_compiled"])
    assert compiled["agent"] == {**tasks.experiment(tasks.TASKS["halfcheetah_ppo"])["agent"], "compile": True}
    assert "halfcheetah_ppo_compiled" not in names
    updates2 = tasks.experiment(tasks.TASKS["halfcheetah_naf_updates2"])["agent"]
    assert "halfcheetah_naf_updates2" not in names
    changed = {key for key in naf["agent"] if naf["agent"][key] != updates2[key]}
    assert changed == {"update_mode", "target_update_weight"}
    assert updates2["update_mode"] == {**naf["agent"]["update_mode"], "updates": 2}
    ddpg, zoo_width = (
        tasks.experiment(tasks.TASKS[name])["agent"] for name in ("halfcheetah_ddpg", "halfcheetah_ddpg_400")
    )
    assert "halfcheetah_ddpg_400" not in names
    dqn, every8 = (tasks.experiment(tasks.TASKS[name])["agent"] for name in ("breakout_dqn", "breakout_dqn_every8"))
    assert "breakout_dqn_every8" not in names and every8 == {
        **dqn,
        "update_mode": {**dqn["update_mode"], "frequency": 8},
    }
    assert {key for key in ddpg if ddpg[key] != zoo_width[key]} == {"network", "critic_network"}
    assert [layer["size"] for layer in ddpg["network"] + ddpg["critic_network"]] == [256] * 4
    for network in (zoo_width["network"], zoo_width["critic_network"]):
        assert [(layer["size"], layer["activation"]) for layer in network] == [(400, "relu"), (300, "relu")]
    # a bfloat16 variant runs where the device computes bfloat16 in hardware: on a CPU without it, it is named
    for native in (True, None):
        monkeypatch.setattr(torchforce.core.networks, "cpu_bfloat16_native", lambda native=native: native)
        assert run.task_names("breakout_dqn_bfloat16")[0] == ["breakout_dqn_bfloat16"]
    monkeypatch.setattr(torchforce.core.networks, "cpu_bfloat16_native", lambda: False)
    names, reasons = run.task_names("breakout_dqn_bfloat16,breakout_dqn")
    assert names == ["breakout_dqn"]
    assert "no AVX512-BF16 or AMX instructions" in reasons["breakout_dqn_bfloat16"]
    assert run.task_names("breakout_dqn_bfloat16", "cuda")[0] == ["breakout_dqn_bfloat16"]
    # a compiled variant runs where TorchInductor finds a C++ compiler
    assert run.task_names("hopper_ppo_compiled")[0] == ["hopper_ppo_compiled"]
    monkeypatch.setattr(torchforce.agents.compute, "cpp_compiler_found", lambda: False)
    names, reasons = run.task_names("hopper_ppo_compiled,hopper_ppo")
    assert names == ["hopper_ppo"] and "no C++ compiler" in reasons["hopper_ppo_compiled"]
