#!/usr/bin/env bash
# What the next hold runs for the paged ledger (issue: context folding) and the ask-user task, on the GPU
# machine after install_on_gpu.sh (carry outputs/gsm8k_input for the ask-user part; the ledgers are generated
# there, deterministically):
#   [LEDGER_QUESTION=lookup] bash scripts/gpu/ledger_hold.sh   # lookup: the ledgers the untrained 0.5B can score on
#                          (experiments/ledger_folding/task.sh); the trainer and the side runs read the same variable
#   bash scripts/gpu/train_bg.sh --status 300 ledger_fold; bash scripts/gpu/side_runs.sh status   # polls
# 1. experiments/ledger_folding, VARIANT=fold, trained for $STEPS (30) GRPO steps, validated every $TEST_FREQ (10); its validation before
#    training is "folding, untrained", after it "folding, trained" ($TEST_COUNT held-out ledgers, greedy).
# 2. beside it, the rollout driver on the same held-out ledgers: ReAct in the 4K window (truncated,
#    the baseline) and in a 24K one (wide, the upper bound); then the ask_hinted variant of the ask-user task
#    (LEDGER_VARIANTS, ASK_VARIANTS and SIDE pass on to scripts/gpu/side_runs.sh).
# Run once, with LEDGER_QUESTION=lookup on an H200 (docs/results/ledger-lookup-h200: 18-64 s a step at 8 x 4, 19
# steps in the hold). For the balance question the sizes are still a guess: a trajectory that reads all 20 pages puts ~14.4K page tokens
# (Qwen2.5 tokenizer, 721 a page) plus its segments' prompts into its training rows, ~17K tokens; the
# experiment's 16 prompts x 8 would be ~2.2M tokens a step once the policy reads everything (the actor
# alone ~54 ms per 1,000 tokens on an H100: docs/benchmarks/training_step.md), far past one hold. Here:
# 8 prompts x 4 samples (~0.5M tokens a step at most) and 128 held-out ledgers (TEST_COUNT; the
# baselines use the same 128). Polls copy everything so far.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-30}
export TEST_COUNT=${TEST_COUNT:-128} TRAIN_COUNT=${TRAIN_COUNT:-1000}
VARIANT=ledger_fold bash scripts/gpu/train_bg.sh ledger_fold actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
  "data.train_batch_size=${BATCH:-8}" "actor_rollout_ref.rollout.n=${N:-4}" "actor_rollout_ref.actor.ppo_mini_batch_size=${BATCH:-8}" \
  "trainer.total_training_steps=$STEPS" "trainer.test_freq=${TEST_FREQ:-10}" +ray_kwargs.ray_init.include_dashboard=false
# the trainer's vLLM sizes its cache from free memory: the side runs wait STAGGER_S before starting theirs. Their
# code is copied now, so later device calls (which re-send the working tree) cannot change it under them.
LEDGERS=$TEST_COUNT LEDGER_VARIANTS=${LEDGER_VARIANTS:-truncated wide} ASK_VARIANTS=${ASK_VARIANTS:-ask_hinted} \
  DELAY_S=${STAGGER_S:-120} bash scripts/gpu/side_runs.sh start
