#!/usr/bin/env bash
# The main job: the whole tfcli journey on this machine. Makes ./demo (or $DEMO_DIR) a tfcli project, keeping
# anything already there, so the demo can run again and again. Each run creates a group of three seeds of PPO on
# CartPole from the shipped config, with a deterministic evaluation every 10,000 steps; the queue runs as many at
# once as the machine has cores for. It follows each run to its end, then prints the results table (every run so
# far), the group's comparison (mean, 95% CI, IQM, steps to 400) and the plot: the seeds' mean with its band and the
# evaluation curve.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TFCLI="$REPO/.venv/bin/tfcli"
DEMO_DIR="${DEMO_DIR:-$REPO/demo}"
NAME="cartpole-ppo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$DEMO_DIR" && cd "$DEMO_DIR"
"$TFCLI" init -n demo
"$TFCLI" experiment new -f cartpole_ppo -n "$NAME" --seeds 0-2 -t 60000 \
    --set 'evaluation={"frequency": "10000t", "episodes": 5}' --start
for seed in 0 1 2; do
    "$TFCLI" experiment watch -e "$NAME-s$seed"
done
echo
"$TFCLI" experiment list
echo
"$TFCLI" experiment compare "$NAME" --threshold 400
"$TFCLI" experiment plot -e "$NAME"
