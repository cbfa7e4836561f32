#!/usr/bin/env bash
# Train with stock verl on GSM8K code-verify (GPU, vLLM):
#   bash experiments/gsm8k_code_verify/run.sh [hydra overrides]
# Prepares the data from ../shared/data/gsm8k/train.jsonl (or $GSM8K_INPUT) on first run.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=experiments/gsm8k_code_verify
OUT=outputs/data/gsm8k_code_verify
if [ ! -f "$OUT/train.parquet" ]; then
  python -m extensions.data.gsm8k --input "${GSM8K_INPUT:-../shared/data/gsm8k/train.jsonl}" \
    --output-dir "$OUT" --agent-name long_workflow --interaction code_verify
  python -m extensions.data.gsm8k --input "${GSM8K_TEST_INPUT:-../shared/data/gsm8k/test.jsonl}" --split test \
    --output-dir "$OUT" --agent-name long_workflow --interaction code_verify --limit 256
fi
python -m verl.trainer.main_ppo --config-path "$PWD/$EXP" --config-name config "$@"
