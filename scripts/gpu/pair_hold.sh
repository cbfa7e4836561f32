#!/usr/bin/env bash
# The two open GPU issues in one hold of a two-GPU machine (nvidia-h100-x2 or nvidia-h200-x2), one GPU each,
# started by the last carry call so that it returns at once (carry outputs/gsm8k_input too):
#   bash scripts/gpu/background.sh setup bash scripts/gpu/pair_hold.sh
#   OUT=$OUT bash scripts/gpu/pair_hold.sh status [SECONDS]   # polls, back to back: waits SECONDS (0), then
#       each part's progress; $OUT gets setup.log, runs.tgz (the trainer, under ledger_fold/), side_ledger.tgz, side_ask.tgz, engines.tgz
# GPU $LEDGER_GPU (1), context folding on the lookup ledgers (LEDGER_QUESTION=lookup; LEDGER_ANSWER and
#   LEDGER_FOOTER pass on to experiments/ledger_folding/task.sh): ledger_hold.sh,
#   the folding loop trained for $STEPS (30) GRPO steps, validated before and after ("folding, untrained" and
#   "trained"), and beside it ReAct truncated (4K window) and wide (24K) on the same 128 held-out ledgers.
# GPU $ENGINES_GPU (0), SGLang and the ask-user task: engines_side_by_side.sh bg (5 training steps with
#   rollout.name=sglang; 256 GSM8K test problems through the driver on SGLang, then vLLM, greedy), and beside
#   it the ask-user task's ask_user variant on 256 problems.
# Order: the vLLM stack and the model, GPU 1's runs (the longest), the SGLang stack, GPU 0's runs.
# On a one-GPU machine both are set to GPU 0 by hand (LEDGER_GPU=0): everything then shares it.
set -euo pipefail
cd "$(dirname "$0")/../.."
LEDGER_GPU=${LEDGER_GPU:-1} ENGINES_GPU=${ENGINES_GPU:-0}
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  bash scripts/gpu/train_bg.sh --status 0 ledger_fold
  for side in side_ledger side_ask; do echo "== $side"; SIDE=/tmp/$side bash scripts/gpu/side_runs.sh status; done
  echo "== engines"; bash scripts/gpu/engines_side_by_side.sh status
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/pair_hold.sh [run | status [SECONDS]]" >&2; exit 2 ;;
esac
export LONGFLOW_GSM8K_DIR=${LONGFLOW_GSM8K_DIR:-$PWD/outputs/gsm8k_input}
[ -f "$LONGFLOW_GSM8K_DIR/test.jsonl" ] || { echo "error: no $LONGFLOW_GSM8K_DIR/test.jsonl: carry outputs/gsm8k_input" >&2; exit 2; }
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -gt "$LEDGER_GPU" ] && [ "$gpus" -gt "$ENGINES_GPU" ] || {
  echo "error: $gpus GPU(s) here; LEDGER_GPU=$LEDGER_GPU ENGINES_GPU=$ENGINES_GPU (set both to 0 to share one)" >&2; exit 2; }
LONGFLOW_STEPS=wheels,check,model bash scripts/gpu/install_on_gpu.sh
echo "== GPU $LEDGER_GPU: ledgers ($(date +%T))"
CUDA_VISIBLE_DEVICES=$LEDGER_GPU LEDGER_QUESTION=${LEDGER_QUESTION:-lookup} STEPS=${STEPS:-30} TEST_FREQ=${TEST_FREQ:-${STEPS:-30}} SIDE=/tmp/side_ledger \
  ASK_VARIANTS=none bash scripts/gpu/ledger_hold.sh
LONGFLOW_STEPS=sglang,check-sglang bash scripts/gpu/install_on_gpu.sh
echo "== GPU $ENGINES_GPU: engines and the ask-user task ($(date +%T))"
export CUDA_VISIBLE_DEVICES=$ENGINES_GPU
bash scripts/gpu/engines_side_by_side.sh bg "${N:-256}" "${ENGINE_STEPS:-5}"
SIDE=/tmp/side_ask LEDGER_VARIANTS=none ASK_VARIANTS=ask_user ASK_LIMIT=256 DELAY_S=${ASK_DELAY_S:-60} \
  bash scripts/gpu/side_runs.sh start
echo "pair hold started ($(date +%T))"
