#!/usr/bin/env bash
# Long workflows at scale on one 4-GPU machine: weak scaling over 1, 2 and 4 GPUs, and sync against v1's
# colocate_async, all on experiments/gsm8k_learn's long-tail workload (python_exec behind a log-normal tool
# latency: tools_long_tail.yaml), turn_grpo, STEPS (10) steps each, the replay buffer polling every 50 ms.
#   bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh     # install, then both waves
#   OUT=$OUT bash scripts/gpu/scale_hold.sh status [SECONDS]                # progress; $OUT gets each run's .tgz
# Wave A, side by side: GPU 0 sync on 1 GPU (16 prompts x 8), GPU 1 colocate_async on 1 GPU (the same), GPUs 2-3
#   sync on 2 GPUs (32 x 8). The two 1-GPU runs validate greedily on all 1,319 GSM8K test problems at the end.
# Wave B, when wave A has ended: sync on all 4 GPUs (64 x 8).
# Needs outputs/data/gsm8k_learn (experiments/gsm8k_learn/prepare_data.sh) in the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-10}
WAVE_A="sync_x1 colo_x1 sync_x2"
WAVE_B="sync_x4"
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  # shellcheck disable=SC2086
  bash scripts/gpu/train_bg.sh --status 0 $WAVE_A $WAVE_B
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/scale_hold.sh [run | status [SECONDS]]" >&2; exit 2 ;;
esac
if [ -z "${SCALE_HOLD_COPY:-}" ]; then  # run from a copy: a later device call replaces the tree under this script
  rm -rf /tmp/scale-src && mkdir -p /tmp/scale-src
  tar --exclude=./.whl-gpu --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C /tmp/scale-src
  cd /tmp/scale-src && SCALE_HOLD_COPY=1 exec bash scripts/gpu/scale_hold.sh run
fi
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -ge 4 ] || { echo "error: $gpus GPU(s) here; this hold needs 4" >&2; exit 2; }
LONGFLOW_STEPS=wheels,check,model bash scripts/gpu/install_on_gpu.sh
common=(algorithm.adv_estimator=turn_grpo "trainer.total_training_steps=$STEPS" trainer.val_before_train=false
  +ray_kwargs.ray_init.include_dashboard=false)
train() {  # NAME GPUS [overrides]: a run in the background on those GPUs, reading its own snapshot's files
  local name=$1 devices=$2; shift 2
  CUDA_VISIBLE_DEVICES=$devices VARIANT=tools bash scripts/gpu/train_bg.sh "$name" "${common[@]}" \
    "actor_rollout_ref.rollout.multi_turn.tool_config_path=/tmp/runs/$name/src/experiments/gsm8k_learn/tools_long_tail.yaml" "$@"
}
echo "== wave A ($(date +%T))"
train sync_x1 0 +gpus=x1 +mode=sync "trainer.test_freq=$STEPS"
train colo_x1 1 +gpus=x1 +mode=colocate_async "trainer.test_freq=$STEPS"
train sync_x2 2,3 +gpus=x2 +mode=sync trainer.test_freq=-1
for n in $WAVE_A; do while [ ! -f "/tmp/runs/$n/rc" ]; do sleep 5; done; done
echo "== wave B ($(date +%T))"
train sync_x4 0,1,2,3 +gpus=x4 +mode=sync trainer.test_freq=-1
while [ ! -f /tmp/runs/sync_x4/rc ]; do sleep 5; done
echo "scale hold done ($(date +%T))"
