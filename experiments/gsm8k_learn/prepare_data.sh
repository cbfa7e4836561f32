#!/usr/bin/env bash
# The A/B's data (idempotent): 2,000 GSM8K train problems and all 1,319 test problems, twice:
#   outputs/data/gsm8k_learn/tools/     long_workflow, python_exec in the code-fence format
#   outputs/data/gsm8k_learn/no_tools/  single_turn_agent, the same system prompt minus the tool line
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=outputs/data/gsm8k_learn
if [ -n "${LONGFLOW_GSM8K_DIR:-}" ]; then train="$LONGFLOW_GSM8K_DIR/train.jsonl"; test="$LONGFLOW_GSM8K_DIR/test.jsonl"
else train=openai/gsm8k; test=openai/gsm8k; fi
PY=${PYTHON:-python}
if [ ! -f "$OUT/tools/test.parquet" ]; then
  "$PY" -m extensions.data.gsm8k --input "$train" --output-dir "$OUT/tools" --agent-name long_workflow \
    --tools python_exec --tool-format code_fence --limit 2000
  "$PY" -m extensions.data.gsm8k --input "$test" --split test --output-dir "$OUT/tools" --agent-name long_workflow \
    --tools python_exec --tool-format code_fence
fi
if [ ! -f "$OUT/no_tools/test.parquet" ]; then
  "$PY" -m extensions.data.gsm8k --input "$train" --output-dir "$OUT/no_tools" --agent-name single_turn_agent \
    --tools '' --limit 2000
  "$PY" -m extensions.data.gsm8k --input "$test" --split test --output-dir "$OUT/no_tools" \
    --agent-name single_turn_agent --tools ''
fi
