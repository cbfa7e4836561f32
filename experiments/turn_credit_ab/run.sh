#!/usr/bin/env bash
# Turn-level credit A/B on the code-fence tool workflow (experiments/gsm8k_learn, VARIANT=tools):
# the same data, reward and 40 GRPO steps, only the advantage estimator differs.
#   ESTIMATOR=grpo      SEED=1 bash experiments/turn_credit_ab/run.sh [hydra overrides]
#   ESTIMATOR=turn_grpo SEED=1 bash experiments/turn_credit_ab/run.sh
#   ESTIMATOR=gigpo_turn SEED=1 bash experiments/turn_credit_ab/run.sh
# Each executed code block cuts the assistant turn into steps; its execution bonus (w_exec = 0.1 per
# clean run, at most 0.2, reward_kwargs of gsm8k_learn/config.yaml) is that step's process reward
# (extensions/rewards/turns.py), which turn_grpo and gigpo_turn credit step by step; grpo sees only
# the trajectory's score. Results: docs/results/turn-credit-ab-h100/.
#
# Two arms can share one GPU (how the results were made): give each vLLM a fixed KV cache so that
# neither sizes its cache from memory the other is still allocating, and no Ray dashboard:
#   actor_rollout_ref.rollout.gpu_memory_utilization=0.15 \
#   +actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=4294967296 \
#   +ray_kwargs.ray_init.include_dashboard=false
set -euo pipefail
cd "$(dirname "$0")/../.."
ESTIMATOR=${ESTIMATOR:-turn_grpo}
SEED=${SEED:-1}
EXPERIMENT_NAME=turn_credit_${ESTIMATOR}_s$SEED VARIANT=tools exec bash experiments/gsm8k_learn/run.sh \
  "algorithm.adv_estimator=$ESTIMATOR" "data.seed=$SEED" "$@"
