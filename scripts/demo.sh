#!/usr/bin/env bash
# The main job: the whole tfcli journey on this machine. Makes ./demo (or $DEMO_DIR) a tfcli project, keeping
# anything already there, so the demo can run again and again; each run creates a new PPO-on-CartPole experiment
# from the shipped config, runs it with a progress bar to the end, then prints the results table (every run so
# far), the comparison and the learning-curve plot's absolute path.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TFCLI="$REPO/.venv/bin/tfcli"
DEMO_DIR="${DEMO_DIR:-$REPO/demo}"
NAME="cartpole-ppo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$DEMO_DIR" && cd "$DEMO_DIR"
"$TFCLI" init -n demo
"$TFCLI" experiment new -f cartpole_ppo -n "$NAME"
"$TFCLI" experiment start -e "$NAME" --follow
echo
"$TFCLI" experiment list
echo
"$TFCLI" experiment compare "$NAME" --threshold 400
"$TFCLI" experiment plot -e "$NAME"
