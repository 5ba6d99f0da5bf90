"""bench/devices.py, the steps/s of the Atari agents per torch device: one short point run end to end on the CPU
(its record, the steady-state DQN it measures, the table), and the table's GPU speed-ups against hand records."""

import json
import subprocess
import sys

import pytest

from tests.bench_modules import BENCH, bench_module


@pytest.fixture(scope="module")
def devices():
    return bench_module("devices")  # the standard library only at import: its neighbours are imported by what runs


@pytest.mark.slow
def test_a_dqn_point_times_steady_state_updates_on_the_cpu(tmp_path):
    command = [sys.executable, str(BENCH / "devices.py"), "--tasks", "breakout_dqn", "--devices", "cpu"]
    command += ["--steps", "96", "--warmup", "32", "--out", str(tmp_path)]
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-2000:]
    (records,) = tmp_path.glob("devices-*.jsonl")
    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    where = (record["library"], record["task"], record["device"], record["environments"], record["mode"])
    assert where == ("torchforce", "breakout_dqn_float32", "cpu", 1, "sync")  # float32 unless asked
    assert record["error"] is None and record["steps"] == 96
    assert record["updates"] == 96 // 4  # from the warm-up's end, one update every 4 steps
    assert 0 < record["update_seconds"] < record["seconds"]
    assert record["acting_seconds"] == pytest.approx(record["seconds"] - record["update_seconds"])
    assert record["gpu_peak_mb"] is None
    assert "| torchforce | breakout_dqn_float32 | cpu | 1 | sync | 1 |" in records.with_suffix(".md").read_text()


@pytest.mark.slow
def test_sb3s_dqn_point_times_its_steady_state_as_torchforces_is_timed(devices, monkeypatch):
    """SB3's point (in this process: the child's work without its start-up): learning from the warm-up's end, one
    update every 4 steps, the updates inside the timed seconds, the zoo's one environment."""
    import argparse

    monkeypatch.syspath_prepend(str(BENCH))  # as when devices.py runs: the zoo's settings come from sb3_tasks.py
    arguments = argparse.Namespace(task="breakout_dqn", device="cpu", steps=96, warmup=32)
    record = devices.sb3_child(arguments)
    assert record["steps"] == 96 and record["updates"] == 96 // 4
    assert 0 < record["update_seconds"] < record["seconds"]
    assert record["acting_seconds"] == pytest.approx(record["seconds"] - record["update_seconds"])
    assert record["environments_used"] == 1 and record["gpu_peak_mb"] is None


def test_mixed_precision_points_are_the_bfloat16_variants_with_their_base_tasks_settings(devices):
    import argparse

    arguments = argparse.Namespace(tasks=["breakout_ppo", "breakout_dqn"], devices=["cpu"], environments=None)
    arguments.__dict__.update(modes=None, threads=[1], steps=None, warmup=None, quick=False, mixed_precision=True)
    arguments.libraries = ["torchforce", "sb3"]  # SB3 has no bfloat16 variant: its points are left out
    points = [(p["task"], p["environments"], p["mode"], p["steps"], p["warmup"]) for p in devices.plan(arguments)]
    assert points == [
        ("breakout_ppo_bfloat16", 8, "sync", 8192, 1024),
        ("breakout_ppo_bfloat16", 16, "subprocess", 8192, 1024),
        ("breakout_dqn_bfloat16", 1, "sync", 4000, 1000),
    ]


def test_sb3_points_step_the_zoos_environments_in_its_process_beside_torchforces_points(devices, monkeypatch):
    import argparse

    monkeypatch.syspath_prepend(str(BENCH))  # as when devices.py runs: the zoo's settings come from sb3_tasks.py
    arguments = argparse.Namespace(tasks=["breakout_ppo", "breakout_dqn"], devices=["cuda"], environments=[32])
    arguments.__dict__.update(modes=["subprocess"], threads=[1], steps=None, warmup=None, quick=False)
    arguments.__dict__.update(mixed_precision=False, libraries=["torchforce", "sb3"])
    points = [(p["library"], p["task"], p["environments"], p["mode"]) for p in devices.plan(arguments)]
    assert points == [
        ("torchforce", "breakout_ppo_float32", 32, "subprocess"),  # float32, whatever "auto" would choose here
        ("sb3", "breakout_ppo", 8, "sync"),  # the zoo's 8 environments, as bench/run.py trains SB3
        ("torchforce", "breakout_dqn_float32", 32, "subprocess"),
        ("sb3", "breakout_dqn", 1, "sync"),
    ]


def test_the_table_gives_a_gpu_point_its_speed_up_over_the_one_thread_cpu_point(devices):
    base = {"task": "breakout_ppo", "environments": 8, "mode": "sync", "error": None, "updates": 4}
    base |= {"seconds": 10.0, "update_seconds": 5.0, "peak_rss_mb": 900.0}
    records = [
        base | {"device": "cpu", "threads": 1, "steps_per_second": 400.0, "device_name": None, "gpu_peak_mb": None},
        base | {"device": "cpu", "threads": 16, "steps_per_second": 800.0, "device_name": None, "gpu_peak_mb": None},
        base
        | {"device": "cuda", "threads": 1, "steps_per_second": 1000.0, "device_name": "H100", "gpu_peak_mb": 512}
        | {"host_syncs_per_act": 1.0, "host_syncs_per_update": 3.0},
        base | {"device": "cuda", "threads": 1, "environments": 16, "error": "failed (exit 1)"},
        base
        | {"library": "sb3", "device": "cuda", "threads": 1, "steps_per_second": 900.0, "device_name": "H100"}
        | {"gpu_peak_mb": 256},
    ]
    rows = devices.table(records).splitlines()[2:]
    assert rows[0].split(" | ")[7] == ""  # a CPU point has no speed-up
    assert rows[2].split(" | ")[:8] == ["| torchforce", "breakout_ppo", "H100", "8", "sync", "1", "1,000", "2.50x"]
    assert rows[2].split(" | ")[9:11] == ["1250.0", "50%"]  # ms per update, update share
    assert rows[2].split(" | ")[-1] == "1.00, 3.0 |"  # host synchronizations per act and per update
    assert rows[0].split(" | ")[-1] == " |"  # counted on CUDA only
    assert "failed" in rows[3]
    assert rows[4].split(" | ")[:8] == ["| sb3", "breakout_ppo", "H100", "8", "sync", "1", "900", ""]  # no SB3 CPU


def test_host_synchronizations_are_counted_per_act_and_per_update_apart(devices, monkeypatch):
    """The count's bookkeeping, with torch's sync debug mode stood in for: each warning it would give goes to the
    acting or to the update it came from."""
    import warnings

    import torch

    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)

    def synchronize():
        warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)

    class Agent:
        def _learn(self):
            synchronize()
            synchronize()
            synchronize()

    class Runner:
        def run(self, num_timesteps):
            for step in range(num_timesteps // 8):  # 8 environments a step
                synchronize()  # the actions back to the host
                if step % 4 == 3:
                    agent._learn()
                warnings.warn("something else", UserWarning, stacklevel=1)

    agent = Agent()
    counts = devices.count_host_syncs(Runner(), agent, rows=128, environments=8)
    assert counts == {"host_syncs_per_act": 1.0, "host_syncs_per_update": 3.0}
    assert modes == ["warn", "default"] and agent._learn.__func__ is Agent._learn  # left as found
