#!/usr/bin/env bash
# The turn-credit A/B (experiments/turn_credit_ab) as arms sharing ONE GPU, started in the
# background on the GPU machine after install_on_gpu.sh:
#   bash scripts/gpu/turn_credit_ab.sh                # grpo_s1, turn_grpo_s1 (two arms: what fits)
#   SEEDS=2 bash scripts/gpu/turn_credit_ab.sh        # the second seed, in the next hold
#   bash scripts/gpu/train_bg.sh --wait grpo_s1 540   # progress; copies that arm's files to $OUT/grpo_s1
# Only the first arm validates before training: the untrained policy and greedy decoding are the same
# for all four. Sharing the GPU: each vLLM gets a fixed 4 GiB KV cache (it would otherwise size its
# cache from free memory that the other arms are still allocating), the actors checkpoint
# activations, no Ray dashboard. Measured on an H100 (docs/results/turn-credit-ab-h100/): four arms do
# not fit 80 GB (engines 7.7-8.8 GiB, actors 8.5-15 GiB each: one ran out of memory), three ran at
# ~27 s a step; with the ~12 minutes of carrying, installing and starting, 30 steps of four arms do
# not fit one 30-minute hold.
# Knobs: STEPS (30), STAGGER_S (45: seconds between starts), SEEDS ("1"), ESTIMATORS ("grpo turn_grpo"),
# VAL_BEFORE (true; false skips the first arm's evaluation before training when it is already measured).
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-30}
share=(
  actor_rollout_ref.rollout.gpu_memory_utilization=0.15
  +actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=4294967296
  actor_rollout_ref.model.enable_gradient_checkpointing=true
  +ray_kwargs.ray_init.include_dashboard=false
  "trainer.total_training_steps=$STEPS" "trainer.test_freq=$STEPS"
)
first=true
for seed in ${SEEDS:-1}; do
  for estimator in ${ESTIMATORS:-grpo turn_grpo}; do
    $first || sleep "${STAGGER_S:-45}"
    VARIANT=tools bash scripts/gpu/train_bg.sh "${estimator}_s$seed" "algorithm.adv_estimator=$estimator" \
      "data.seed=$seed" "trainer.val_before_train=$($first && echo "${VAL_BEFORE:-true}" || echo false)" "${share[@]}"
    first=false
  done
done
