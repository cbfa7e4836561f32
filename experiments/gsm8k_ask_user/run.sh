#!/usr/bin/env bash
# gsm8k_ask_user through the rollout driver: the same problems (1) masked, with the simulated user,
# (2) in full, without a user, (3) masked, without a user (control), (4) as (1) with the question
# saying a number is missing and asking to be asked; then one table of the figures.
#   bash experiments/gsm8k_ask_user/run.sh                                   # GPU: vLLM, 256 problems
#   BACKEND=hf LIMIT=8 RESPONSE_LENGTH=1024 bash experiments/gsm8k_ask_user/run.sh  # CPU, embedded model
# Extra arguments are Hydra overrides for every run (e.g. actor_rollout_ref.model.path=/models/qwen).
# Error trajectories (a user reply that copies the agent, ...) are recorded and counted, and the next variant
# still runs: MAX_ERROR_RATE (1) is the driver's --max-error-rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
LIMIT=${LIMIT:-256}
BACKEND=${BACKEND:-vllm}
RL=${RESPONSE_LENGTH:-2048}
OUT=${OUT:-outputs/gsm8k_ask_user}
DATA=${DATA:-outputs/data/gsm8k_ask_user}
VARIANTS=${VARIANTS:-ask_user full masked ask_hinted}
# GSM8K test: $GSM8K_INPUT, else $LONGFLOW_GSM8K_DIR/test.jsonl, else the public openai/gsm8k
INPUT=${GSM8K_INPUT:-${LONGFLOW_GSM8K_DIR:+$LONGFLOW_GSM8K_DIR/test.jsonl}}
$PY -m extensions.data.gsm8k_ask_user --input "${INPUT:-openai/gsm8k}" --split test \
  --output-dir "$DATA" --limit "$LIMIT"
for variant in $VARIANTS; do
  $PY -m extensions.rollout experiments/gsm8k_ask_user --backend "$BACKEND" --data "$DATA/$variant.parquet" \
    --limit "$LIMIT" --batch-size "${BATCH_SIZE:-$LIMIT}" --out "$OUT/$variant" --max-error-rate "${MAX_ERROR_RATE:-1}" \
    actor_rollout_ref.rollout.response_length="$RL" data.max_response_length="$RL" \
    actor_rollout_ref.rollout.temperature=0 "$@"
done
$PY - "$OUT" $VARIANTS <<'PY'
import json, sys
from pathlib import Path


def asked(record):
    """An assistant message sent to the user (a user turn was added after it) that contains a '?'."""
    turns = record["turns"]
    return any(
        t["role"] == "assistant" and "?" in t.get("visible_text", "") and nxt["role"] == "user" and nxt["span"][1] > nxt["span"][0]
        for t, nxt in zip(turns, turns[1:])
    )


out = Path(sys.argv[1])
print(f"{'variant':<10} {'n':>4} {'accuracy':>9} {'asked':>6} {'user_turns':>10} {'errors':>6}  termination reasons")
for variant in sys.argv[2:]:
    s = json.loads((out / variant / "summary.json").read_text())
    records = [json.loads(line) for line in (out / variant / "trajectories.jsonl").read_text().splitlines()]
    ask_rate = sum(map(asked, records)) / len(records)
    print(f"{variant:<10} {s['trajectories']:>4} {s['accuracy']!s:>9} {ask_rate:>6.3f} {s['user_turn_rate']!s:>10} "
          f"{s['errors']:>6}  {s['termination_reasons']}")
PY
