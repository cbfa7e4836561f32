#!/usr/bin/env bash
# GRPO on GSM8K train, validated greedily on all 1,319 GSM8K test problems (GPU, vLLM):
#   bash experiments/gsm8k_learn/run.sh [hydra overrides]                    # (A) code-fence python_exec
#   VARIANT=no_tools bash experiments/gsm8k_learn/run.sh [hydra overrides]   # (B) same prompt minus tools
# Data: GSM8K from $LONGFLOW_GSM8K_DIR/{train,test}.jsonl when set, else the public openai/gsm8k.
set -euo pipefail
cd "$(dirname "$0")/../.."
VARIANT=${VARIANT:-tools}
bash experiments/gsm8k_learn/prepare_data.sh
case $VARIANT in
  tools) extra=() ;;
  no_tools) extra=(actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent) ;;
  *) echo "VARIANT=$VARIANT: expected tools or no_tools" >&2; exit 2 ;;
esac
python -m verl.trainer.main_ppo --config-path "$PWD/experiments/gsm8k_learn" --config-name config \
  "data.train_files=$PWD/outputs/data/gsm8k_learn/$VARIANT/train.parquet" \
  "data.val_files=$PWD/outputs/data/gsm8k_learn/$VARIANT/test.parquet" \
  "actor_rollout_ref.rollout.multi_turn.tool_config_path=$PWD/experiments/gsm8k_learn/tools.yaml" \
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/experiments/gsm8k_learn/agent_loops.yaml" \
  "trainer.experiment_name=${EXPERIMENT_NAME:-gsm8k_learn_$VARIANT}" "${extra[@]}" "$@"
