"""bench/gpu_check.sh, the GPU part of issue 11 in one device call: with a stand-in Python that records its
arguments, the steps run in their order (the CUDA tests, the cuda points beside the one-thread CPU points, the
cuda points in bfloat16, the CPU points with all threads), the cuda ones only where torch sees a GPU, and the log
lands in $OUT. The real run happens on a lent GPU machine; it was rehearsed here without one (bench/README.md).
bench/gpu_followup.sh, the second check, likewise (its steps, and picking some), and bench/gpu_lib.sh's time limit
ending everything a step started."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE_PYTHON = """#!/usr/bin/env bash
# stands in for python3: answers the script's two questions, records every other call
if [[ $1 == - ]]; then cat >/dev/null; echo "Python 3.12.3, torch 2.11.0, CUDA $FAKE_CUDA"; exit 0; fi
if [[ $1 == -c ]]; then echo "$FAKE_CUDA"; exit 0; fi
echo "$*" >> "$CALLS"
"""


def run_check(tmp_path: Path, cuda: bool, script: str = "gpu_check.sh", **variables: str) -> tuple[list[str], str]:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls, out = tmp_path / "calls", tmp_path / "out"
    environment = os.environ | {
        "PYTHON": str(python),
        "OUT": str(out),
        "CALLS": str(calls),
        "FAKE_CUDA": "1" if cuda else "0",
        "GPU_CHECK_QUICK": "1",
        "PATH": f"{tmp_path}:{os.environ['PATH']}",  # no nvidia-smi in tmp_path: the script says so and goes on
        "WHEELS": str(tmp_path / "wheels"),  # none: not this checkout's .whl/, if it has one
        **variables,
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / script)], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / script.replace(".sh", ".log")).read_text()
    assert log == done.stdout  # the log holds what was printed
    return [line for line in calls.read_text().splitlines() if "pip install" not in line], log


@pytest.mark.parametrize("cuda", [True, False], ids=["gpu", "no-gpu"])
def test_the_steps_run_in_order_and_the_cuda_ones_only_with_a_gpu(tmp_path, cuda):
    calls, log = run_check(tmp_path, cuda)
    out = tmp_path / "out"
    cores = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()  # as the script
    expected = ["-m pytest -q -p no:cacheprovider tests/agents/test_cuda.py"]
    if cuda:
        expected += [
            f"bench/devices.py --devices cuda cpu --out {out} --quick",
            f"bench/devices.py --devices cuda --mixed-precision --out {out} --quick",
        ]
    else:
        expected += [f"bench/devices.py --devices cpu --out {out} --quick"]
    expected += [f"bench/devices.py --devices cpu --threads {cores} --out {out} --quick"]
    assert calls == expected
    assert ("no CUDA here" in log) is not cuda
    assert "=== test_cuda: exit 0 after" in log and log.rstrip().endswith("=== done")


@pytest.mark.parametrize("cuda", [True, False], ids=["gpu", "no-gpu"])
def test_the_followup_runs_its_steps_on_the_gpu_where_there_is_one(tmp_path, cuda):
    calls, log = run_check(tmp_path, cuda, "gpu_followup.sh")
    out, device = tmp_path / "out", "cuda" if cuda else "cpu"
    assert [call.split()[0] for call in calls] == ["bench/distributed.py", "bench/devices.py", "bench/tasks.py"]
    assert calls[0] == (
        f"bench/distributed.py --experiment breakout_ppo --device {device} --workers 1 2 --environments 2 "
        f"--steps 2048 --out {out}"
    )
    assert calls[1] == f"bench/devices.py --devices {device} --libraries torchforce sb3 --quick --out {out}"
    assert calls[2].startswith(
        f"bench/tasks.py --task breakout_ppo --library torchforce --seed 0 --device {device} "
        f"--vectorization subprocess --steps 3000 --environments 2 --curve {out}/breakout_ppo-curve.jsonl --games "
    )
    assert ("no CUDA here" in log) is not cuda and log.rstrip().endswith("=== done")


def test_the_followup_runs_only_the_steps_asked_for(tmp_path):
    calls, log = run_check(tmp_path, True, "gpu_followup.sh", GPU_FOLLOWUP_STEPS="learning")
    assert [call.split()[0] for call in calls] == ["bench/tasks.py"]
    assert "=== breakout_ppo's budget on cuda (at most 280s)" in log


def test_a_step_past_its_time_limit_ends_with_everything_it_started(tmp_path):
    """A step's command that leaves a process behind (as a process pool's worker, or Ray's, outlives a driver that
    ``timeout`` ends): the process is gone once the step returns, so it cannot run on into the next step."""
    left = tmp_path / "left"
    script = f"""
source {ROOT / "bench" / "gpu_lib.sh"}
step stuck 1 bash -c 'sleep 600 & echo $! > {left}; wait'
"""
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert "=== stuck: exit 124 after" in done.stdout and "(time limit)" in done.stdout
    pid = int(left.read_text())
    gone = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    assert gone[:1] in ("", "Z")  # no such process, or a zombie awaiting its reaper (stat "ZN" under nice), not "S"


def test_the_followups_named_steps_measure_scaling_with_each_workers_own_steps(tmp_path):
    """``scaling`` (CartPole PPO and DQN workers on the CPU cores) and ``long`` (Breakout PPO workers on the GPU)
    run only when named, each with ``--per-worker`` steps so that the many-worker points last as long as one's."""
    calls, log = run_check(tmp_path, True, "gpu_followup.sh", GPU_FOLLOWUP_STEPS="scaling long")
    out = tmp_path / "out"
    assert calls == [
        "bench/distributed.py --config ppo_cartpole --environments 8 --time-to 475 --per-worker --workers 1 2 "
        f"--steps 2048 --out {out}",
        "bench/distributed.py --config dqn_cartpole --sync-every 4 --per-worker --workers 1 2 --steps 1000 "
        f"--out {out}",
        "bench/distributed.py --experiment breakout_ppo --device cuda --environments 8 --per-worker --workers 1 2 "
        f"--steps 2048 --out {out}",
    ]
    assert "=== breakout_ppo workers on cuda, long (at most 330s)" in log and log.rstrip().endswith("=== done")
    (tmp_path / "default").mkdir()
    assert "--per-worker" not in " ".join(run_check(tmp_path / "default", True, "gpu_followup.sh")[0])
