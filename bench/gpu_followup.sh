#!/usr/bin/env bash
# The second GPU check of issue 11, for what bench/gpu_check.sh left open, most important first, each step under
# its own time limit so that what finished comes back even when a later step runs long:
#
#   1. the machine and versions, Ray and Stable-Baselines3 among them;
#   2. bench/distributed.py on the GPU: the shipped breakout_ppo's agent, 8 Breakout copies a worker, in one
#      process and as 1 and 8 Ray workers sharing the GPU (each asks Ray for its share, as DistributedRunner
#      does on a cluster), steps/s, and the device each worker's agent computed on, asked of the workers;
#   3. bench/devices.py with SB3 beside torchforce on the GPU: both libraries' steady state, DQN updating (the
#      zoo's DQN acts at random for its first 100k steps, so a learning run of a few minutes never shows it);
#   4. the shipped breakout_ppo's whole budget, 500k steps (2M frames), on the GPU with 16 environments in worker
#      processes: a learning curve longer than any CPU run here (bench/tasks.py's curve of real games);
#
# and, only when named (what the second check left open, issue 11):
#
#   scaling  bench/distributed.py on the machine's CPU cores, CartPole-v1: the shipped ppo_cartpole (8 copies a
#            worker, 100k steps a worker, time to 475) and dqn_cartpole (4 copies a worker, an exchange every 4
#            updates, 20k steps a worker) with 1, 4, 8 and 14 workers: the 16-core points this 2-core machine
#            cannot run (target: efficiency >= 0.8 at 8 workers); about 4 minutes, from this machine's points;
#   long     step 2's distributed breakout_ppo long enough to give an efficiency (the second check's 8-worker
#            point lasted 13 s, two updates a worker): one process, 1 worker and 8 workers, 40k steps in each
#            worker (39 updates of 1,024 steps); about 5 minutes on the H200, from the second check's speeds.
#
# Ray and the wheels the machine lacks come from .whl/ (bench/gpu_wheels.sh fetches them here). With the device
# tool:
#
#   bash bench/gpu_wheels.sh        # here, once: Gymnasium, ALE, SB3 and Ray for Python 3.12 into .whl/ (36 MB)
#   run(command="GPU_FOLLOWUP_STEPS='distributed devices' bash bench/gpu_followup.sh", carry=[".whl"], timeout_s=360)
#   run(command="GPU_FOLLOWUP_STEPS=learning bash bench/gpu_followup.sh", carry=[".whl"], timeout_s=300)
#   run(command="GPU_FOLLOWUP_STEPS='scaling long' bash bench/gpu_followup.sh", carry=[".whl"], timeout_s=600)
#
# All three steps take about 10.5 minutes, more than one call of the device tool may run (10), hence the two calls
# (GPU_FOLLOWUP_STEPS picks steps; all by default). On 2026-11-30 (bench/README.md, "The second GPU check") each
# distributed point took 35-45 s, 15-25 s of it starting Ray, the workers and their CUDA, and SB3's and
# torchforce's device points 25-40 s each with their start-up. The two steps run only when named take about 8.5
# minutes together (estimated, not yet run there), one call.
#
# Output goes to $OUT (bench/results/gpu-followup here): gpu_followup.log with everything printed, the records and
# tables of steps 2 and 3, and step 4's curve and result. GPU_CHECK_QUICK=1 runs a smoke of each step instead (to
# rehearse the script on a machine without a GPU, on the CPU).
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench/results/gpu-followup}
mkdir -p "$OUT"
source bench/gpu_lib.sh

if [[ ${GPU_CHECK_QUICK:-0} == 1 ]]; then
    distributed=(--workers 1 2 --environments 2 --steps 2048)
    devices=(--quick)
    learning=(--steps 3000 --environments 2)
    ppo_scaling=(--workers 1 2 --steps 2048)
    dqn_scaling=(--workers 1 2 --steps 1000)
    long=(--workers 1 2 --steps 2048)
else
    distributed=(--workers 1 8 --environments 8 --steps 16384)
    devices=(--modes sync)
    learning=(--steps 500000 --environments 16)
    ppo_scaling=(--workers 1 4 8 14 --steps 100000)
    dqn_scaling=(--workers 1 4 8 14 --steps 20000)
    long=(--workers 1 8 --steps 40000)
fi

check() {
    install_wheels || exit 1
    describe_machine gymnasium ale_py ray stable_baselines3 || exit 1
    local device=cpu
    [[ $("$PYTHON" -c "import torch; print(int(torch.cuda.is_available()))") == 1 ]] && device=cuda
    [[ $device == cpu ]] && echo "=== no CUDA here: every step runs on the CPU"

    local steps=" ${GPU_FOLLOWUP_STEPS:-distributed devices learning} "
    [[ $steps == *" distributed "* ]] && step "distributed workers on $device" 170 "$PYTHON" bench/distributed.py \
        --experiment breakout_ppo --device "$device" "${distributed[@]}" --out "$OUT"
    [[ $steps == *" devices "* ]] && step "SB3 and torchforce on $device" 170 "$PYTHON" bench/devices.py \
        --devices "$device" --libraries torchforce sb3 "${devices[@]}" --out "$OUT"
    if [[ $steps == *" learning "* ]]; then
        step "breakout_ppo's budget on $device" 280 "$PYTHON" bench/tasks.py --task breakout_ppo \
            --library torchforce --seed 0 --device "$device" --vectorization subprocess "${learning[@]}" \
            --curve "$OUT/breakout_ppo-curve.jsonl" --games "$(mktemp -d)" > "$OUT/breakout_ppo-result.json"
        cat "$OUT/breakout_ppo-result.json"
    fi
    if [[ $steps == *" scaling "* ]]; then
        step "CartPole PPO workers on the CPU cores" 120 "$PYTHON" bench/distributed.py --config ppo_cartpole \
            --environments 8 --time-to 475 --per-worker "${ppo_scaling[@]}" --out "$OUT"
        step "CartPole DQN workers on the CPU cores" 150 "$PYTHON" bench/distributed.py --config dqn_cartpole \
            --sync-every 4 --per-worker "${dqn_scaling[@]}" --out "$OUT"
    fi
    [[ $steps == *" long "* ]] && step "breakout_ppo workers on $device, long" 330 "$PYTHON" bench/distributed.py \
        --experiment breakout_ppo --device "$device" --environments 8 --per-worker "${long[@]}" --out "$OUT"
    echo "=== done"
}

check 2>&1 | tee "$OUT/gpu_followup.log"
