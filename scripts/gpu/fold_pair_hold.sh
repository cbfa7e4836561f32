#!/usr/bin/env bash
# Context folding on a two-GPU machine, started in the background (scripts/gpu/background.sh) so that it
# returns at once (the ledgers are generated there, deterministically; nothing else needs carrying):
#   bash scripts/gpu/background.sh setup bash scripts/gpu/fold_pair_hold.sh
#   OUT=$OUT bash scripts/gpu/fold_pair_hold.sh status [SECONDS]   # polls: waits SECONDS (0), then progress;
#       $OUT gets setup.log, runs.tgz (the trainer, under ledger_fold/) and side_ledger.tgz (the driver's runs)
# GPU $TRAIN_GPU (1): experiments/ledger_folding VARIANT=fold on LEDGER_QUESTION's ledgers (flagged), trained for
#   $STEPS (30) GRPO steps at 8 prompts x 4, validated once at the end ("folding, trained"); no validation before
#   training, which GPU 0 measures instead.
# GPU $SIDE_GPU (0), alone, so with a larger fixed KV cache (KV_BYTES, 32 GiB): the rollout driver on the same
#   $TEST_COUNT (128) held-out ledgers, greedy: ReAct truncated (the 2K window), folding untrained, ReAct wide.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAIN_GPU=${TRAIN_GPU:-1} SIDE_GPU=${SIDE_GPU:-0}
export LEDGER_QUESTION=${LEDGER_QUESTION:-flagged} TEST_COUNT=${TEST_COUNT:-128} TRAIN_COUNT=${TRAIN_COUNT:-1000}
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  bash scripts/gpu/train_bg.sh --status 0 ledger_fold
  echo "== side_ledger"; SIDE=/tmp/side_ledger bash scripts/gpu/side_runs.sh status
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/fold_pair_hold.sh [run | status [SECONDS]]" >&2; exit 2 ;;
esac
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -gt "$TRAIN_GPU" ] && [ "$gpus" -gt "$SIDE_GPU" ] || {
  echo "error: $gpus GPU(s) here; TRAIN_GPU=$TRAIN_GPU SIDE_GPU=$SIDE_GPU (set both to 0 to share one)" >&2; exit 2; }
LONGFLOW_STEPS=wheels,check,model bash scripts/gpu/install_on_gpu.sh
echo "== GPU $TRAIN_GPU: folding, trained ($(date +%T))"
CUDA_VISIBLE_DEVICES=$TRAIN_GPU VARIANT=ledger_fold bash scripts/gpu/train_bg.sh ledger_fold \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 data.train_batch_size=8 actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.actor.ppo_mini_batch_size=8 "trainer.total_training_steps=${STEPS:-30}" \
  "trainer.test_freq=${STEPS:-30}" trainer.val_before_train=false +ray_kwargs.ray_init.include_dashboard=false
echo "== GPU $SIDE_GPU: truncated, folding untrained, wide ($(date +%T))"
CUDA_VISIBLE_DEVICES=$SIDE_GPU KV_BYTES=${KV_BYTES:-34359738368} SIDE=/tmp/side_ledger LEDGERS=$TEST_COUNT \
  LEDGER_VARIANTS="truncated fold wide" ASK_VARIANTS=none DELAY_S=0 bash scripts/gpu/side_runs.sh start
echo "fold pair hold started ($(date +%T))"
