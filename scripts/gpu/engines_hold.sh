#!/usr/bin/env bash
# What the next hold runs for the GPU runs still missing (issue: SGLang side by side with vLLM, training on
# SGLang, the ask-user task), on the GPU machine, started by the last carry call so that it returns at once:
#   bash scripts/gpu/background.sh setup bash scripts/gpu/engines_hold.sh      # carry outputs/gsm8k_input too
#   then poll, back to back:
#   bash scripts/gpu/background.sh --status 240 setup; OUT=$OUT bash scripts/gpu/engines_side_by_side.sh status;
#   OUT=$OUT bash scripts/gpu/side_runs.sh status
# 1. every install step (vLLM and SGLang stacks, the model);
# 2. in the background, at once: 5 steps of experiments/gsm8k_learn on the v1 trainer with rollout.name=sglang,
#    and beside it the same 256 GSM8K test problems through the rollout driver on SGLang, then on vLLM (greedy)
#    (engines_side_by_side.sh bg);
# 3. beside them, after DELAY_S (0 s): the ask-user task's ask_hinted and ask_user variants on 256 problems
#    (side_runs.sh). All of it shares one GPU, to fit one hold.
# outputs/gsm8k_input holds GSM8K's train.jsonl and test.jsonl (no network there).
set -euo pipefail
cd "$(dirname "$0")/../.."
export LONGFLOW_GSM8K_DIR=${LONGFLOW_GSM8K_DIR:-$PWD/outputs/gsm8k_input}
[ -f "$LONGFLOW_GSM8K_DIR/test.jsonl" ] || { echo "error: no $LONGFLOW_GSM8K_DIR/test.jsonl: carry outputs/gsm8k_input" >&2; exit 2; }
LONGFLOW_STEPS=${LONGFLOW_STEPS:-wheels,check,sglang,check-sglang,model} bash scripts/gpu/install_on_gpu.sh
bash scripts/gpu/engines_side_by_side.sh bg "${N:-256}" "${STEPS:-5}"
LEDGER_VARIANTS=none ASK_VARIANTS=${ASK_VARIANTS:-"ask_hinted ask_user"} ASK_LIMIT=${ASK_LIMIT:-256} DELAY_S=${DELAY_S:-0} \
  bash scripts/gpu/side_runs.sh start
