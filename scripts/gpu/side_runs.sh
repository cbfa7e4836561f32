#!/usr/bin/env bash
# Rollout-driver runs (vLLM) beside the trainers of one hold, on the GPU machine after install_on_gpu.sh:
#   [DELAY_S=120] [WAIT_FOR=FILE] bash scripts/gpu/side_runs.sh start   # in the background (after DELAY_S, and once
#       FILE exists and says 0: a trainer's rc, when the runs need its saved weights; then WAIT_AFTER_S (15) more
#       for its GPU memory), one after the other:
#       1. experiments/ledger_folding on $LEDGERS (64) held-out ledgers (split test), greedy, $LEDGER_VARIANTS of
#          truncated (react in the preset's window), wide (react, WIDE_RESPONSE), fold ($FOLD_LOOP); "none": skip;
#          truncated and fold run against one engine start (--force-agent-name react,$FOLD_LOOP);
#          the ledgers, window and FOLD_LOOP are LEDGER_QUESTION's (experiments/ledger_folding/task.sh)
#       2. experiments/gsm8k_ask_user, variants $ASK_VARIANTS ("ask_hinted"), $ASK_LIMIT (256) test problems
#   bash scripts/gpu/side_runs.sh status   # one line per finished part; $OUT/side.tgz holds everything so far
#   (SIDE=/tmp/NAME: the runs' folder, default /tmp/side; several at once each need their own, and their status
#   writes $OUT/NAME.tgz)
# Each engine gets a fixed KV cache ($KV_BYTES, 6 GiB: scripts/gpu/gpu_share.sh) so that it can share the GPU with running trainers.
# SIDE_ARGS: more overrides for every ledger run. actor_rollout_ref.rollout.enforce_eager=true did not pay: 154.8 s to
# start against 159.4 s compiled, and 60.4 s against 12.1 s for 128 folding ledgers on an H100
# (docs/results/ledger-fold-grpo30-mb96-h100/fold_grpo_rescored/fresh_engine, ../ledger-fold-grpo30-h100/fold).
# Needs outputs/gsm8k_input/test.jsonl (GSM8K test; carry it: there is no network there).
set -uo pipefail
cd "$(dirname "$0")/../.."
SIDE=${SIDE:-/tmp/side}
case ${1:-} in
start)
  mkdir -p "$SIDE/src"
  source scripts/gpu/hold_start.sh && snapshot_tree "$SIDE/src"
  # the code is copied now; with DELAY_S the runs start that much later (a trainer's vLLM starting first)
  (cd "$SIDE/src" && setsid nohup bash -c 'sleep "${DELAY_S:-0}"
    while [ -n "${WAIT_FOR:-}" ] && [ ! -e "$WAIT_FOR" ]; do sleep 10; done
    if [ -n "${WAIT_FOR:-}" ] && [ "$(cat "$WAIT_FOR")" != 0 ]; then echo "not run: $WAIT_FOR says $(cat "$WAIT_FOR")"; exit 1; fi
    sleep "${WAIT_AFTER_S:-15}"; bash scripts/gpu/side_runs.sh run' \
    > "$SIDE/console.log" 2>&1 < /dev/null &)
  [ "${DELAY_S:-0}" = 0 ] && when="" || when=" (runs in $DELAY_S s)"
  echo "side runs started$when: $SIDE/console.log"
  ;;
run)
  source "${LONGFLOW_ENV_FILE:-/tmp/longflow-env.sh}"
  export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
  export LONGFLOW_MODEL_PATH=${LONGFLOW_MODEL_PATH:-/tmp/longflow/qwen25-coder-0.5b-instruct}
  source scripts/gpu/gpu_share.sh   # VLLM_SHARE: a fixed KV cache beside the trainers
  data=$SIDE/ledger_data
  variants=${LEDGER_VARIANTS:-truncated wide fold}
  [ "$variants" = none ] && variants=""   # the ask-user part alone: no ledgers written
  if [ -n "$variants" ]; then
    source experiments/ledger_folding/task.sh   # LEDGER_ARGS, FOLD_LOOP: the trainer's held-out ledgers and loop
    # shellcheck disable=SC2086
    python3 -m extensions.data.ledger --output-dir "$data" --split test --count "${LEDGERS:-64}" --agent-name react $LEDGER_ARGS
  fi
  # truncated and fold share the window: one engine start for both (--force-agent-name A,B), ~2.5 min saved
  [[ " $variants " == *" truncated "* && " $variants " == *" fold "* ]] &&
    variants="truncated+fold $(echo " $variants " | sed 's/ truncated / /; s/ fold / /')"
  for variant in $variants; do
    case $variant in
      truncated) args=(--force-agent-name react) ;;
      wide) args=(--force-agent-name react data.max_response_length=$WIDE_RESPONSE actor_rollout_ref.rollout.response_length=$WIDE_RESPONSE) ;;
      fold) args=(--force-agent-name "$FOLD_LOOP") ;;
      truncated+fold) args=(--force-agent-name "react,$FOLD_LOOP") ;;
      *) echo "LEDGER_VARIANTS: unknown variant $variant (truncated, wide, fold)"; continue ;;
    esac
    echo "== ledger $variant $(date +%T)"
    # shellcheck disable=SC2086  # WINDOW_ARGS: an option list
    python3 -m extensions.rollout experiments/ledger_folding --backend vllm --data "$data/test.parquet" \
      --limit "${LEDGERS:-64}" --batch-size "${LEDGERS:-64}" --out "$SIDE/ledger/$variant" \
      actor_rollout_ref.rollout.temperature=0 $WINDOW_ARGS "${args[@]}" "${VLLM_SHARE[@]}" ${SIDE_ARGS:-}
    echo "ledger $variant rc $? $(date +%T)"
    if [ "$variant" = truncated+fold ]; then   # the usual folders: ledger/truncated, ledger/fold
      mv "$SIDE/ledger/$variant/react" "$SIDE/ledger/truncated" && mv "$SIDE/ledger/$variant/$FOLD_LOOP" "$SIDE/ledger/fold" &&
        rmdir "$SIDE/ledger/$variant"
    fi
  done
  if [ "${ASK_VARIANTS:-}" = none ]; then echo "side runs done $(date +%T)"; exit 0; fi
  echo "== ask_user $(date +%T)"
  PYTHON=python3 GSM8K_INPUT=$PWD/outputs/gsm8k_input/test.jsonl OUT=$SIDE/ask DATA=$SIDE/ask_data \
    LIMIT=${ASK_LIMIT:-256} VARIANTS=${ASK_VARIANTS:-ask_hinted} bash experiments/gsm8k_ask_user/run.sh "${VLLM_SHARE[@]}"
  echo "ask_user rc $? $(date +%T)"
  echo "side runs done $(date +%T)"
  ;;
status)
  grep -E "^(== |ask_user rc|ledger .* rc|side runs done|variant|full|masked|ask_)" "$SIDE/console.log" 2>/dev/null
  tail -n 3 "$SIDE/console.log" 2>/dev/null | cut -c1-300
  if [ -n "${OUT:-}" ] && [ -d "$SIDE" ]; then
    (cd "$SIDE" && tar -czf "$OUT/$(basename "$SIDE").tgz" --exclude=./src --exclude=./ask_data --exclude=./ledger_data .)
  fi
  ;;
*) echo "usage: bash scripts/gpu/side_runs.sh start|status" >&2; exit 2 ;;
esac
