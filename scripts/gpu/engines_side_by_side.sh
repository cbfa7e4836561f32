#!/usr/bin/env bash
# SGLang vs vLLM on the GPU machine (after install_on_gpu.sh built both stacks: /tmp/site and /tmp/site-sglang):
#
#   LONGFLOW_GSM8K_DIR=shared/data/gsm8k bash scripts/gpu/engines_side_by_side.sh rollouts [N=256]
#       the same first N GSM8K test problems, code-verify workflow (experiments/gsm8k_code_verify,
#       long_workflow + code_verify user), through `python -m extensions.rollout --backend sglang`,
#       then `--backend vllm`; writes $OUT/engines/{sglang,vllm}/{trajectories.jsonl,summary.json,driver.log}
#       and $OUT/engines/side_by_side.{json,md}: trajectories/s, generated tokens/s, termination
#       reasons, accuracy, exit status (and the error text of an engine that failed).
#   bash scripts/gpu/engines_side_by_side.sh train [STEPS=3] [hydra overrides]
#       stock main_ppo (v1 trainer) on experiments/gsm8k_learn with actor_rollout_ref.rollout.name=sglang
#       for STEPS steps, in the background through scripts/gpu/train_bg.sh (run name sglang_train);
#       then: bash scripts/gpu/train_bg.sh --wait sglang_train 540   (back to back until it ends)
#
# Knobs: OUT (default outputs/gpu), LONGFLOW_MODEL_DIR (default /tmp/longflow/qwen25-coder-0.5b-instruct),
# BATCH (driver --batch-size, default 64), ENGINES (order, default "sglang vllm"),
# LONGFLOW_VLLM_ENV / LONGFLOW_SGLANG_ENV (env files, default /tmp/longflow-env.sh / /tmp/longflow-env-sglang.sh).
# Each engine runs in its own process with its own env file: the two stacks cannot share a site.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:-}; shift || true
OUTDIR=${OUT:-outputs/gpu}
MODEL=${LONGFLOW_MODEL_DIR:-/tmp/longflow/qwen25-coder-0.5b-instruct}
declare -A ENVF=([vllm]=${LONGFLOW_VLLM_ENV:-/tmp/longflow-env.sh} [sglang]=${LONGFLOW_SGLANG_ENV:-/tmp/longflow-env-sglang.sh})

need_gsm8k() {
    [ -n "${LONGFLOW_GSM8K_DIR:-}" ] && [ -f "$LONGFLOW_GSM8K_DIR/test.jsonl" ] || {
        echo "error: set LONGFLOW_GSM8K_DIR to a folder with GSM8K {train,test}.jsonl (no network there)" >&2; exit 2; }
}

case $MODE in
rollouts)
    N=${1:-256}; need_gsm8k
    DATA=outputs/data/engines_gsm8k
    ( source "${ENVF[vllm]}" 2>/dev/null || source "${ENVF[sglang]}"
      python3 -m extensions.data.gsm8k --input "$LONGFLOW_GSM8K_DIR/test.jsonl" --split test --output-dir "$DATA" \
          --agent-name long_workflow --interaction code_verify --limit "$N" ) || exit 1
    RES=$OUTDIR/engines; mkdir -p "$RES"
    for e in ${ENGINES:-sglang vllm}; do
        mkdir -p "$RES/$e"
        echo "== $e: $N samples"
        ( [ -f "${ENVF[$e]}" ] || { echo "error: ${ENVF[$e]} missing: run install_on_gpu.sh for $e" >&2; exit 2; }
          source "${ENVF[$e]}"; export PYTHONPATH=$PWD:$PYTHONPATH
          python3 -m extensions.rollout experiments/gsm8k_code_verify --backend "$e" --data "$DATA/test.parquet" \
              --limit "$N" --batch-size "${BATCH:-64}" --out "$RES/$e" --max-error-rate 1 \
              "actor_rollout_ref.model.path=$MODEL" ) > "$RES/$e/driver.log" 2>&1
        echo $? > "$RES/$e/rc"; echo "   exit $(cat "$RES/$e/rc")"; tail -n 15 "$RES/$e/driver.log"
    done
    python3 scripts/gpu/engines_table.py "$RES" ${ENGINES:-sglang vllm}
    ;;
train)
    STEPS=${1:-3}; shift || true; need_gsm8k
    ( source "${ENVF[sglang]}" && PYTHON=python3 bash experiments/gsm8k_learn/prepare_data.sh ) || exit 1
    LONGFLOW_ENV_FILE=${ENVF[sglang]} LONGFLOW_MODEL_PATH=$MODEL bash scripts/gpu/train_bg.sh sglang_train \
        actor_rollout_ref.rollout.name=sglang "trainer.total_training_steps=$STEPS" \
        trainer.val_before_train=false trainer.test_freq=-1 "$@"
    echo "then, back to back: OUT=\$OUT bash scripts/gpu/train_bg.sh --wait sglang_train 540"
    ;;
*)
    sed -n '2,21p' "$0"; exit 2 ;;
esac
