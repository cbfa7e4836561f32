#!/usr/bin/env bash
# The next measurements of long workflows at scale, on one 4-GPU machine, on experiments/gsm8k_learn's long-tail
# workload (tools_long_tail.yaml), turn_grpo, STEPS (10) steps each, the replay buffer polling every 50 ms:
#   wave A, side by side: GPU 0 sync and GPU 1 colocate_async, one GPU each, second seed (data.seed=2,
#     rollout.seed=43; the first seed is docs/results/long-tail-scaling-h200x4), both validated on all 1,319 test
#     problems at the end; GPUs 2-3 separate_async (1 trainer GPU + 1 rollout GPU), validated too.
#   wave B, side by side: GPUs 0-1 colocate_async on 2 GPUs, GPUs 2-3 sync on 2 GPUs (32 prompts x 8 each).
#   wave C: colocate_async on all 4 GPUs (64 x 8).
#   bash scripts/gpu/background.sh setup bash scripts/gpu/async_hold.sh     # install, then WAVES (A B C)
#   OUT=$OUT bash scripts/gpu/async_hold.sh status [SECONDS]                # progress; $OUT gets each run's .tgz
# Trainers side by side get one weight-sync socket each from the pack (extensions/verl_compat/weight_ipc.py); the
# status lines show each run's socket: two runs must show different ones.
# Needs outputs/data/gsm8k_learn (experiments/gsm8k_learn/prepare_data.sh) in the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-10}
WAVES=${WAVES:-A B C}
RUNS="sync_x1_s2 colo_x1_s2 sep_x1 colo_x2 sync_x2_b colo_x4"
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  # shellcheck disable=SC2086
  bash scripts/gpu/train_bg.sh --status 0 $RUNS
  for n in $RUNS; do
    [ -f "/tmp/runs/$n/console.log" ] || continue
    echo "$n socket: $(grep -ao 'weight-sync socket: [^ ]*' "/tmp/runs/$n/console.log" | sort -u | tr '\n' ' ')"
  done
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/async_hold.sh [run | status [SECONDS]]" >&2; exit 2 ;;
esac
if [ -z "${ASYNC_HOLD_COPY:-}" ]; then  # run from a copy: a later device call replaces the tree under this script
  rm -rf /tmp/async-src && mkdir -p /tmp/async-src
  tar --exclude=./.whl-gpu --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C /tmp/async-src
  cd /tmp/async-src && ASYNC_HOLD_COPY=1 exec bash scripts/gpu/async_hold.sh run
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
wait_for() { for n in "$@"; do while [ ! -f "/tmp/runs/$n/rc" ]; do sleep 5; done; done; }
seed2=(data.seed=2 actor_rollout_ref.rollout.seed=43 "trainer.test_freq=$STEPS")
for wave in $WAVES; do
  echo "== wave $wave ($(date +%T))"
  case $wave in
  A) train sync_x1_s2 0 +gpus=x1 +mode=sync "${seed2[@]}"
     train colo_x1_s2 1 +gpus=x1 +mode=colocate_async "${seed2[@]}"
     train sep_x1 2,3 +gpus=x1 +mode=separate_async "trainer.test_freq=$STEPS"
     wait_for sync_x1_s2 colo_x1_s2 sep_x1 ;;
  B) train colo_x2 0,1 +gpus=x2 +mode=colocate_async trainer.test_freq=-1
     train sync_x2_b 2,3 +gpus=x2 +mode=sync trainer.test_freq=-1
     wait_for colo_x2 sync_x2_b ;;
  C) train colo_x4 0,1,2,3 +gpus=x4 +mode=colocate_async trainer.test_freq=-1
     wait_for colo_x4 ;;
  *) echo "unknown wave $wave (A, B or C)" >&2; exit 2 ;;
  esac
done
echo "async hold done ($(date +%T))"
