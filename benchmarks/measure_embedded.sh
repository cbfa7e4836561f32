#!/usr/bin/env bash
# The embedded backend's main-job figures (docs/benchmarks/embedded_backend.md) on one quiet machine, one after
# another, in the order the doc gives them:
#   bash benchmarks/measure_embedded.sh OUTDIR
# 1. the main job's rollout, end to end, 1 torch thread, then 2 threads (LONGFLOW_HF_THREADS=2);
# 2. the same rollout on row-major float32 weights (commit 78f0281, before column_major_linears), 1 thread;
# 3. the main job's 13 model calls replayed on plain model.generate, HFServer without and with prefix reuse.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?OUTDIR}"); mkdir -p "$out"
trap 'git worktree remove --force /tmp/longflow-rowmajor 2>/dev/null || true' EXIT
py=$PWD/.venv/bin/python
rollout() {  # name, dir, env...
  local name=$1 dir=$2; shift 2
  echo "== $name ($(date +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$dir" && env "$@" /usr/bin/time -f "wall %e s, user %U s, sys %S s" "$py" -m extensions.rollout \
    experiments/gsm8k_code_verify --backend hf --data "$OLDPWD/outputs/data/main_job/train.parquet" --limit 4 \
    --batch-size 4 --out "$out/$name" actor_rollout_ref.rollout.response_length=1536 \
    data.max_response_length=1536 actor_rollout_ref.rollout.temperature=0) > "$out/$name.log" 2>&1
  tail -14 "$out/$name.log"
}
rollout main_job_1thread . LONGFLOW_HF_THREADS=1
rollout main_job_2threads . LONGFLOW_HF_THREADS=2
rm -rf /tmp/longflow-rowmajor && git worktree add -f /tmp/longflow-rowmajor 78f0281 > /dev/null
rollout main_job_rowmajor_1thread /tmp/longflow-rowmajor LONGFLOW_HF_THREADS=1
echo "== replay of the main job's model calls ($(date +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
LONGFLOW_HF_THREADS=1 "$py" -m benchmarks.embedded_backend --parts kernel,main_job --servers after,before,plain \
  --trajectories "$out/main_job_1thread/trajectories.jsonl" --out "$out/embedded_backend_main_job.json" \
  2>&1 | tee "$out/embedded_backend_main_job.log" | grep -v "^\s*$" | tail -8
