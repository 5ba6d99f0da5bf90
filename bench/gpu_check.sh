#!/usr/bin/env bash
# The GPU part of issue 11 in one run on a lent GPU machine, most important first, each step under its own time
# limit so that what finished comes back even when a later step runs long:
#
#   1. the machine and versions (nvidia-smi, Python, torch, whether torchforce imports);
#   2. tests/agents/test_cuda.py (skipped on a machine without CUDA, as in CI);
#   3. bench/devices.py on cuda and on one CPU thread: breakout_ppo and breakout_dqn acting and learning, steps/s,
#      host waits, and each GPU point's speed-up over its CPU point;
#   4. the cuda points in bfloat16 (mixed_precision);
#   5. the CPU points with all torch threads.
#
# Wheels the machine lacks come from .whl/ (bench/gpu_wheels.sh fetches them here). With the device tool:
#
#   bash bench/gpu_wheels.sh        # here, once: Gymnasium, ALE and SB3 for Python 3.12 into .whl/
#   run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=540)   # 8.5 minutes at most; 6.3 on 2026-11-30
#
# Output goes to $OUT (the device tool's folder that comes back; bench/results/gpu-check here): gpu_check.log
# with everything printed, and devices.py's records and tables (three runs, six files). GPU_CHECK_QUICK=1 runs
# devices.py's few-hundred-step smoke instead (to rehearse the script on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/results/gpu-check}
mkdir -p "$OUT"
quick=()
[[ ${GPU_CHECK_QUICK:-0} == 1 ]] && quick=(--quick)

source bench/gpu_lib.sh

check() {
    install_wheels || exit 1
    isolated_path
    trap remove_isolated_path EXIT

    describe_machine gymnasium ale_py || exit 1
    cuda=$("$PYTHON" -c "import torch; print(int(torch.cuda.is_available()))")

    step test_cuda 130 "$PYTHON" -m pytest -q -p no:cacheprovider tests/agents/test_cuda.py
    devices=(cpu)
    [[ $cuda == 1 ]] && devices=(cuda cpu) || echo "=== no CUDA here: the cuda points are left out"
    step "devices ${devices[*]}" 210 "$PYTHON" bench/devices.py --devices "${devices[@]}" --out "$OUT" "${quick[@]}"
    [[ $cuda == 1 ]] && step "devices cuda bfloat16" 75 "$PYTHON" bench/devices.py --devices cuda --mixed-precision \
        --out "$OUT" "${quick[@]}"
    step "devices cpu, $(nproc) threads" 80 "$PYTHON" bench/devices.py --devices cpu --threads "$(nproc)" \
        --out "$OUT" "${quick[@]}"
    echo "=== done"
}

check 2>&1 | tee "$OUT/gpu_check.log"
