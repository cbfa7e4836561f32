#!/usr/bin/env bash
# Start a training run of experiments/gsm8k_learn in the background on the GPU machine (after
# install_on_gpu.sh), so that it outlives the 10-minute device call that starts it:
#   bash scripts/gpu/train_bg.sh NAME [hydra overrides]     # -> /tmp/runs/NAME/{console.log,metrics.jsonl,rc}
#   bash scripts/gpu/train_bg.sh --wait NAME SECONDS        # print progress until it ends or SECONDS pass,
#                                                          # then copy the run's files to $OUT (if set)
# Poll back to back: the machine goes back after 30 s idle, and /tmp/runs with it.
# The repo's working tree comes first on PYTHONPATH, so the carried wheel of the pack is not used.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --wait ]; then
  name=$2; deadline=$(( $(date +%s) + $3 )); dir=/tmp/runs/$name
  while [ ! -f "$dir/rc" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 15; done
  grep -E "^step:[0-9]+ " "$dir/console.log" | tail -n 3 | cut -c1-600
  grep -oE "val-core/[^ ]*acc/mean@1:[^ ]*" "$dir/console.log" | tail -n 3
  grep -ciE "Traceback|Error" "$dir/console.log" | sed 's/^/error lines: /'
  [ -f "$dir/rc" ] && echo "exit code: $(cat "$dir/rc")" || echo "still running"
  if [ -n "${OUT:-}" ]; then mkdir -p "$OUT/$name" && cp "$dir"/* "$OUT/$name/" && gzip -f "$OUT/$name/console.log"; fi
  exit 0
fi
name=$1; shift
source "${LONGFLOW_ENV_FILE:-/tmp/longflow-env.sh}"   # LONGFLOW_ENV_FILE=/tmp/longflow-env-sglang.sh: the SGLang stack
export PYTHONPATH=$PWD:$PYTHONPATH LONGFLOW_MODEL_PATH=${LONGFLOW_MODEL_PATH:-/tmp/longflow/qwen25-coder-0.5b-instruct}
export PYTHONUNBUFFERED=1 VERL_FILE_LOGGER_PATH=/tmp/runs/$name/metrics.jsonl
mkdir -p "/tmp/runs/$name"
cmd=(python3 -m verl.trainer.main_ppo --config-path "$PWD/experiments/gsm8k_learn" --config-name config
  "data.train_files=$PWD/outputs/data/gsm8k_learn/train.parquet"
  "data.val_files=$PWD/outputs/data/gsm8k_learn/test.parquet"
  "actor_rollout_ref.rollout.multi_turn.tool_config_path=$PWD/experiments/gsm8k_code_verify/tools.yaml"
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/experiments/gsm8k_code_verify/agent_loops.yaml"
  "trainer.experiment_name=$name" "$@")
printf '%q ' "${cmd[@]}" > "/tmp/runs/$name/command.txt"
setsid nohup bash -c '"$@" > "$0/console.log" 2>&1; echo $? > "$0/rc"' "/tmp/runs/$name" "${cmd[@]}" < /dev/null > /dev/null 2>&1 &
echo "started $name (pid $!): $(cat "/tmp/runs/$name/command.txt")"
