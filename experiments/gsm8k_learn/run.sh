#!/usr/bin/env bash
# GRPO on GSM8K train with the code-verify workflow, validated on 256 GSM8K test problems (GPU, vLLM):
#   bash experiments/gsm8k_learn/run.sh [hydra overrides]
# Data: GSM8K from $LONGFLOW_GSM8K_DIR/{train,test}.jsonl when set, else the public openai/gsm8k.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=outputs/data/gsm8k_learn
if [ ! -f "$OUT/train.parquet" ]; then
  if [ -n "${LONGFLOW_GSM8K_DIR:-}" ]; then train="$LONGFLOW_GSM8K_DIR/train.jsonl"; test="$LONGFLOW_GSM8K_DIR/test.jsonl"
  else train=openai/gsm8k; test=openai/gsm8k; fi
  python -m extensions.data.gsm8k --input "$train" --output-dir "$OUT" --agent-name long_workflow \
    --interaction code_verify --limit 2000
  python -m extensions.data.gsm8k --input "$test" --split test --output-dir "$OUT" --agent-name long_workflow \
    --interaction code_verify --limit 256
fi
python -m verl.trainer.main_ppo --config-path "$PWD/experiments/gsm8k_learn" --config-name config "$@"
