#!/usr/bin/env bash
# Train with stock verl on GSM8K code-verify (GPU, vLLM):
#   bash experiments/gsm8k_code_verify/run.sh [hydra overrides]
# Prepares the data on first run from the public openai/gsm8k (Hugging Face `datasets`, needs network),
# or from a local copy: LONGFLOW_GSM8K_DIR=DIR (DIR/train.jsonl, DIR/test.jsonl), or GSM8K_INPUT=FILE
# and GSM8K_TEST_INPUT=FILE.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=experiments/gsm8k_code_verify
OUT=outputs/data/gsm8k_code_verify
if [ ! -f "$OUT/train.parquet" ]; then
  python -m extensions.data.gsm8k ${GSM8K_INPUT:+--input "$GSM8K_INPUT"} \
    --output-dir "$OUT" --agent-name long_workflow --interaction code_verify
  python -m extensions.data.gsm8k ${GSM8K_TEST_INPUT:+--input "$GSM8K_TEST_INPUT"} --split test \
    --output-dir "$OUT" --agent-name long_workflow --interaction code_verify --limit 256
fi
python -m verl.trainer.main_ppo --config-path "$PWD/$EXP" --config-name config "$@"
