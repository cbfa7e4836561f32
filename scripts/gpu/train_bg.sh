#!/usr/bin/env bash
# Start a training run of experiments/gsm8k_learn in the background on the GPU machine (after
# install_on_gpu.sh), so that it outlives the 10-minute device call that starts it:
#   VARIANT=tools|no_tools bash scripts/gpu/train_bg.sh NAME [hydra overrides]
#   VARIANT=ledger_fold bash scripts/gpu/train_bg.sh NAME [overrides]   # experiments/ledger_folding, fold variant
#   VARIANT=code_verify bash scripts/gpu/train_bg.sh NAME [overrides]   # experiments/gsm8k_code_verify: long_workflow
#                                      # with python_exec and the code-verify user (carry outputs/data/gsm8k_code_verify)
#                                      # -> /tmp/runs/NAME/{console.log,metrics.jsonl,val/,rc,command.txt}
#   bash scripts/gpu/train_bg.sh --wait NAME SECONDS   # print progress until it ends or SECONDS pass,
#                                                      # then copy the run's files to $OUT/NAME (if $OUT is set)
#   bash scripts/gpu/train_bg.sh --status SECONDS NAME...  # several runs: wait until all end or SECONDS pass,
#                                                      # one line each, GPU memory; $OUT/runs.tgz holds each
#                                                      # run's command, metrics, console log, rc and val/ so far
#                                                      # under NAME/ (one file: $OUT takes back 8 at most)
# The run works on a snapshot of the repo taken at start (/tmp/runs/NAME/src), so later device calls,
# which re-send the working tree, never change the code under a running trainer. Its data is
# outputs/data/gsm8k_learn/$VARIANT (experiments/gsm8k_learn/prepare_data.sh; carry it on the first call).
# Poll back to back: the machine goes back after 30 s idle, and /tmp/runs with it.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --status ]; then   # --status SECONDS NAME...: wait until every run ends or SECONDS pass
  deadline=$(( $(date +%s) + $2 )); shift 2
  ended() { for n in "$@"; do [ -f "/tmp/runs/$n/rc" ] || return 1; done; }
  while ! ended "$@" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 15; done
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  archived=()
  for n in "$@"; do
    d=/tmp/runs/$n
    last=$(grep -aoE "step:[0-9]+ - .*" "$d/console.log" 2>/dev/null | tail -n 1)
    echo "$n: $(grep -oE '^step:[0-9]+' <<< "$last") $(grep -oE 'timing_s/step:[0-9.]+' <<< "$last")" \
      "$(grep -oE 'critic/score/mean:[-0-9.]+' <<< "$last")" \
      "$(grep -oE "val-core/[^ @]*/acc/mean@1:[^ ]*" "$d/console.log" 2>/dev/null | tail -n 1)" \
      "$(grep -oE "val-core/[^ ]*@[^ /]*/acc/mean@1:[^ ]*" "$d/console.log" 2>/dev/null | tail -n 1)" \
      "tracebacks: $(grep -c Traceback "$d/console.log" 2>/dev/null)" "$([ -f "$d/rc" ] && echo "exit $(cat "$d/rc")")"
    for f in command.txt metrics.jsonl console.log rc val rollouts; do [ -e "$d/$f" ] && archived+=("$n/$f"); done
  done
  if [ -n "${OUT:-}" ] && [ "${#archived[@]}" -gt 0 ]; then   # everything so far, every run in one file
    tar -czf "$OUT/runs.tgz" -C /tmp/runs "${archived[@]}"
    size=$(stat -c %s "$OUT/runs.tgz")   # $OUT hands back files of up to 16 MiB
    echo "runs.tgz: $((size / 1024)) KiB$([ "$size" -gt $((15 * 1024 * 1024)) ] && echo ", near the 16 MiB a file \$OUT hands back: copy fewer runs")"
  elif [ -n "${OUT:-}" ]; then
    echo "runs.tgz: no run has files yet"
  fi
  exit 0
fi
if [ "${1:-}" = --wait ]; then
  name=$2; deadline=$(( $(date +%s) + $3 )); dir=/tmp/runs/$name
  while [ ! -f "$dir/rc" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 15; done
  grep -aoE "step:[0-9]+ - .*" "$dir/console.log" | tail -n 2 | cut -c1-900
  grep -oE "val-core/[^ ]*acc/mean@1:[^ ]*" "$dir/console.log" | tail -n 3   # labelled sources (VAL_ALSO) too
  grep -ciE "Traceback|Error" "$dir/console.log" | sed 's/^/error lines: /'
  [ -f "$dir/rc" ] && echo "exit code: $(cat "$dir/rc")" || echo "still running"
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT/$name"
    cp "$dir"/command.txt "$dir"/metrics.jsonl "$OUT/$name/" 2>/dev/null
    [ -f "$dir/rc" ] && cp "$dir/rc" "$OUT/$name/"
    gzip -c "$dir/console.log" > "$OUT/$name/console.log.gz"
    [ -d "$dir/val" ] && tar -czf "$OUT/$name/val.tar.gz" -C "$dir" val
  fi
  exit 0
fi
name=$1; shift
VARIANT=${VARIANT:-tools}
case $VARIANT in
  tools|ledger_fold|code_verify) extra=() ;;
  no_tools) extra=(actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent) ;;
  *) echo "VARIANT=$VARIANT: expected tools, no_tools, ledger_fold or code_verify" >&2; exit 2 ;;
esac
run=/tmp/runs/$name; src=$run/src
mkdir -p "$src"
rm -f "$run/rc"   # an earlier run's exit code under the same name must not read as this one's
source scripts/gpu/hold_start.sh && snapshot_tree "$src"
source "${LONGFLOW_ENV_FILE:-/tmp/longflow-env.sh}"   # LONGFLOW_ENV_FILE=/tmp/longflow-env-sglang.sh: the SGLang stack
export PYTHONPATH=$src:$PYTHONPATH LONGFLOW_MODEL_PATH=${LONGFLOW_MODEL_PATH:-/tmp/longflow/qwen25-coder-0.5b-instruct}
export PYTHONUNBUFFERED=1 VERL_FILE_LOGGER_PATH=$run/metrics.jsonl
if [ "$VARIANT" = ledger_fold ]; then   # its run.sh writes the ledgers (deterministic) and starts main_ppo
  cmd=(env VARIANT=fold PYTHON=python3 bash experiments/ledger_folding/run.sh
    "trainer.validation_data_dir=$run/val" "trainer.experiment_name=$name" "$@")
elif [ "$VARIANT" = code_verify ]; then   # the config's relative paths resolve in $src, where the run starts
  data=$src/outputs/data/gsm8k_code_verify
  [ -f "$data/test.parquet" ] || { echo "missing $data/test.parquet: carry outputs/data/gsm8k_code_verify" >&2; exit 2; }
  cmd=(python3 -m verl.trainer.main_ppo --config-path "$src/experiments/gsm8k_code_verify" --config-name config
    "trainer.validation_data_dir=$run/val" "trainer.experiment_name=$name" "$@")
else
data=$src/outputs/data/gsm8k_learn/$VARIANT
[ -f "$data/test.parquet" ] || { echo "missing $data/test.parquet: carry outputs/data/gsm8k_learn" >&2; exit 2; }
cmd=(python3 -m verl.trainer.main_ppo --config-path "$src/experiments/gsm8k_learn" --config-name config
  "data.train_files=$data/train.parquet" "data.val_files=$data/test.parquet"
  "actor_rollout_ref.rollout.multi_turn.tool_config_path=$src/experiments/gsm8k_learn/tools.yaml"
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$src/experiments/gsm8k_learn/agent_loops.yaml"
  "trainer.validation_data_dir=$run/val" "trainer.experiment_name=$name" "${extra[@]}" "$@")
fi
{ env | grep -E '^(LEDGER_[A-Z_]+|LONGFLOW_MODEL_PATH|VAL_ALSO|TEST_COUNT|TRAIN_COUNT)=' | sort | sed 's/^/# env: /'; printf '%q ' "${cmd[@]}"; } > "$run/command.txt"
(cd "$src" && setsid nohup bash -c '"$@" > "$0/console.log" 2>&1; echo $? > "$0/rc"' "$run" "${cmd[@]}" < /dev/null > /dev/null 2>&1 &)
echo "started $name ($VARIANT): $(cat "$run/command.txt")"
