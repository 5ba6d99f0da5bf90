#!/usr/bin/env bash
# The main job: the whole tfcli journey on this machine. Makes ./demo a tfcli project (keeping anything already
# there), creates a PPO-on-CartPole experiment from the shipped config, runs it with a progress bar to the end,
# then prints the results table and writes the learning-curve plot.
set -euo pipefail
TFCLI="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/tfcli"
NAME="cartpole-ppo-$(date +%Y%m%d-%H%M%S)"
mkdir -p demo && cd demo
"$TFCLI" init -n demo
"$TFCLI" experiment new -f cartpole_ppo -n "$NAME"
"$TFCLI" experiment start -e "$NAME" --follow
echo
"$TFCLI" experiment list
echo
"$TFCLI" experiment compare "$NAME" --threshold 400
"$TFCLI" experiment plot -e "$NAME"
