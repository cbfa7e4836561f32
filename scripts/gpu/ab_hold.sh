#!/usr/bin/env bash
# The tools A/B with two seeds per arm on one 4-GPU machine, one arm per GPU, all four at once:
# experiments/gsm8k_learn, (A) tools = the code-fence workflow with python_exec, (B) no_tools = the same prompt
# without tools (verl's single_turn_agent); STEPS (40) GRPO steps of 16 prompts x 8, greedy held-out accuracy on
# all 1,319 GSM8K test problems before step 1 and after the last step.
#   bash scripts/gpu/background.sh setup bash scripts/gpu/ab_hold.sh     # install, then the four runs
#   OUT=$OUT bash scripts/gpu/ab_hold.sh status [SECONDS]                # progress; $OUT gets runs.tgz
# Seed s sets the data order (data.seed=s) and vLLM's sampling seed (rollout.seed=41+s): seed 1 is the
# committed config's (data.seed 1, rollout.seed 42). Both arms of a seed see the same problems in the same order.
# Needs outputs/data/gsm8k_learn (experiments/gsm8k_learn/prepare_data.sh) in the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-40}
RUNS="tools_s1 no_tools_s1 tools_s2 no_tools_s2"
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  # shellcheck disable=SC2086
  bash scripts/gpu/train_bg.sh --status 0 $RUNS
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/ab_hold.sh [run | status [SECONDS]]" >&2; exit 2 ;;
esac
source scripts/gpu/hold_start.sh
hold_run_from_copy ab scripts/gpu/ab_hold.sh run
hold_install 4
arm() {  # NAME VARIANT GPU SEED
  CUDA_VISIBLE_DEVICES=$3 VARIANT=$2 bash scripts/gpu/train_bg.sh "$1" "trainer.total_training_steps=$STEPS" \
    "trainer.test_freq=$STEPS" trainer.val_before_train=true "data.seed=$4" "actor_rollout_ref.rollout.seed=$((41 + $4))" \
    +ray_kwargs.ray_init.include_dashboard=false
}
echo "== four arms ($(date +%T))"
arm tools_s1 tools 0 1
arm no_tools_s1 no_tools 1 1
arm tools_s2 tools 2 2
arm no_tools_s2 no_tools 3 2
for n in $RUNS; do while [ ! -f "/tmp/runs/$n/rc" ]; do sleep 5; done; done
echo "ab hold done ($(date +%T))"
