#!/usr/bin/env bash
# What the next hold runs for the paged ledger (issue: context folding) and the ask-user task, on the GPU
# machine after install_on_gpu.sh (carry outputs/gsm8k_input for the ask-user part; the ledgers are generated
# there, deterministically):
#   bash scripts/gpu/ledger_hold.sh
#   bash scripts/gpu/train_bg.sh --status 300 ledger_fold; bash scripts/gpu/side_runs.sh status   # polls
# 1. experiments/ledger_folding, VARIANT=fold, trained for $STEPS (30) GRPO steps; its validation before
#    training is "folding, untrained", after it "folding, trained" (256 held-out ledgers, greedy).
# 2. beside it, the rollout driver on the same 256 held-out ledgers: ReAct in the 4K window (truncated,
#    the baseline) and in a 24K one (wide, the upper bound); then the ask_hinted variant of the ask-user task.
# Not run yet: the step time of the fold variant is unknown (each trajectory reads ~14K tokens of pages
# through 4K segments), so 30 steps may not fit one 30-minute hold; polls copy everything so far.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-30}
VARIANT=ledger_fold bash scripts/gpu/train_bg.sh ledger_fold actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
  "trainer.total_training_steps=$STEPS" "trainer.test_freq=$STEPS" +ray_kwargs.ray_init.include_dashboard=false
sleep "${STAGGER_S:-120}"   # the trainer's vLLM sizes its cache from free memory: let it start first
LEDGERS=256 LEDGER_VARIANTS="truncated wide" ASK_VARIANTS=ask_hinted bash scripts/gpu/side_runs.sh start
