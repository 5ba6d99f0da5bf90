"""bench/gpu_check.sh, the GPU part of issue 11 in one device call: with a stand-in Python that records its
arguments, the steps run in their order (the CUDA tests, the cuda points beside the one-thread CPU points, the
cuda points in bfloat16, the CPU points with all threads), the cuda ones only where torch sees a GPU, and the log
lands in $OUT. The real run happens on a lent GPU machine; it was rehearsed here without one (bench/README.md)."""

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


def run_check(tmp_path: Path, cuda: bool) -> tuple[list[str], str]:
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
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh")], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "gpu_check.log").read_text()
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
