#!/usr/bin/env bash
# The main job on a fresh CPU machine: set up, then run GSM8K-style problems through the
# code-verify workflow on the embedded Qwen2.5-Coder-0.5B (no GPU, no model hub), writing
# trajectories (JSONL), a summary and an HTML report under outputs/main_job/.
#   bash scripts/main_job.sh                 # 4 problems
#   LIMIT=1 RESPONSE_LENGTH=512 bash scripts/main_job.sh   # the short form CI runs
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
LIMIT=${LIMIT:-4}
# Every core for torch here (the library's default leaves one for the event loop and tools): on a quiet
# 2-core machine two threads made the rollout 1.74x faster, token-identical (docs/benchmarks/embedded_backend.md).
# On a machine shared with other jobs, LONGFLOW_HF_THREADS=1 is the safer choice.
export LONGFLOW_HF_THREADS=${LONGFLOW_HF_THREADS:-$(nproc)}
RESPONSE_LENGTH=${RESPONSE_LENGTH:-1536}
.venv/bin/python -m extensions.data.gsm8k --input experiments/gsm8k_code_verify/sample_problems.jsonl \
  --output-dir outputs/data/main_job --agent-name long_workflow --interaction code_verify
time .venv/bin/python -m extensions.rollout experiments/gsm8k_code_verify --backend hf \
  --data outputs/data/main_job/train.parquet --limit "$LIMIT" --batch-size 4 --out outputs/main_job \
  actor_rollout_ref.rollout.response_length="$RESPONSE_LENGTH" data.max_response_length="$RESPONSE_LENGTH" \
  actor_rollout_ref.rollout.temperature=0
echo "open outputs/main_job/report.html"
