#!/usr/bin/env bash
# SGLang vs vLLM on the GPU machine (after install_on_gpu.sh built both stacks: /tmp/site and /tmp/site-sglang):
#
#   LONGFLOW_GSM8K_DIR=shared/data/gsm8k bash scripts/gpu/engines_side_by_side.sh rollouts [N=256]
#       the same first N GSM8K test problems, code-verify workflow (experiments/gsm8k_code_verify,
#       long_workflow + code_verify user), through `python -m extensions.rollout --backend sglang`,
#       then `--backend vllm`; writes $OUT/engines/{sglang,vllm}/{trajectories.jsonl,summary.json,driver.log}
#       and $OUT/engines/side_by_side.{json,md}: trajectories/s, generated tokens/s, termination
#       reasons, accuracy, exit status (and the error text of an engine that failed).
#   bash scripts/gpu/engines_side_by_side.sh train [STEPS=5] [hydra overrides]
#       stock main_ppo (v1 trainer) on experiments/gsm8k_learn with actor_rollout_ref.rollout.name=sglang
#       for STEPS steps, in the background through scripts/gpu/train_bg.sh (run name sglang_train);
#       then: bash scripts/gpu/train_bg.sh --wait sglang_train 540   (back to back until it ends)
#
#   OUT=$OUT bash scripts/gpu/engines_side_by_side.sh bg [N=256] [STEPS=5]
#       both of the above at once in the background, the trainer first and the rollouts beside it (setsid; log
#       /tmp/engines/console.log), so they outlive the device call and share the GPU with whatever else runs; `status` then prints progress and
#       copies $OUT/engines.tgz (side_by_side.*, each engine's summary/log/trajectories, the trainer's files).
#
# Greedy (temperature 0). GPU memory is shared with other runs, so each engine gets the same fixed KV cache
# (KV_BYTES, 6 GiB): vLLM through kv_cache_memory_bytes, SGLang through max_total_tokens (KV_BYTES over the
# model's KV bytes per token, read from its config.json). SGLang's mem_fraction_static (verl's
# gpu_memory_utilization) is a share of the memory FREE when it starts (sglang 0.5.12,
# model_runner_kv_cache_mixin._profile_available_bytes), so SGL_FRACTION (0.5) only has to leave the cap room.
# `bg` starts the SGLang trainer first and the rollouts beside it: every figure is a shared GPU's.
# Knobs: OUT (default outputs/gpu), LONGFLOW_MODEL_DIR (default /tmp/longflow/qwen25-coder-0.5b-instruct),
# BATCH (driver --batch-size, default 64), ENGINES (order, default "sglang vllm"),
# LONGFLOW_VLLM_ENV / LONGFLOW_SGLANG_ENV (env files, default /tmp/longflow-env.sh / /tmp/longflow-env-sglang.sh).
# Each engine runs in its own process with its own env file: the two stacks cannot share a site.
set -uo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$0")/../.."
MODE=${1:-}; shift || true
OUTDIR=${OUT:-outputs/gpu}
MODEL=${LONGFLOW_MODEL_DIR:-/tmp/longflow/qwen25-coder-0.5b-instruct}
declare -A ENVF=([vllm]=${LONGFLOW_VLLM_ENV:-/tmp/longflow-env.sh} [sglang]=${LONGFLOW_SGLANG_ENV:-/tmp/longflow-env-sglang.sh})

need_gsm8k() {
    [ -n "${LONGFLOW_GSM8K_DIR:-}" ] && [ -f "$LONGFLOW_GSM8K_DIR/test.jsonl" ] || {
        echo "error: set LONGFLOW_GSM8K_DIR to a folder with GSM8K {train,test}.jsonl (no network there)" >&2; exit 2; }
}

kv_tokens() {  # KV_BYTES over the model's K+V bytes per token (bf16): SGLang's max_total_tokens
    python3 - "$MODEL/config.json" "$KV_BYTES" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
heads = c.get("num_key_value_heads", c["num_attention_heads"])
head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
print(int(sys.argv[2]) // (2 * c["num_hidden_layers"] * heads * head_dim * 2))
PY
}
source scripts/gpu/gpu_share.sh   # KV_BYTES, VLLM_SHARE
declare -A SHARE=([vllm]="${VLLM_SHARE[*]}")
sglang_share() {
    local tokens; tokens=$(kv_tokens) || { echo "error: cannot size SGLang's KV cache from $MODEL/config.json" >&2; exit 2; }
    echo "actor_rollout_ref.rollout.gpu_memory_utilization=${SGL_FRACTION:-0.5} +actor_rollout_ref.rollout.engine_kwargs.sglang.max_total_tokens=$tokens"
}

case $MODE in
bg)
    need_gsm8k   # here, not only inside the detached job
    mkdir -p /tmp/engines
    # results under /tmp/engines/res: the device's $OUT is emptied before every call
    (OUT=/tmp/engines/res setsid nohup bash -c 'bash "$0" train "$2"; bash "$0" rollouts "$1"; OUT= bash scripts/gpu/train_bg.sh --wait sglang_train 3000; echo "engines done $(date +%T)"' \
        "$SELF" "${1:-256}" "${2:-5}" > /tmp/engines/console.log 2>&1 < /dev/null &)
    echo "engines side by side started: /tmp/engines/console.log"
    ;;
status)
    grep -E "^(== |   exit|\| |Greedy|started|then|engines done|step:)" /tmp/engines/console.log 2>/dev/null | cut -c1-300
    grep -aoE "step:[0-9]+ - .*" /tmp/runs/sglang_train/console.log 2>/dev/null | tail -n 1 | cut -c1-400
    tail -n 2 /tmp/engines/console.log 2>/dev/null | cut -c1-300
    if [ -n "${OUT:-}" ]; then
        files=(/tmp/engines)
        for f in command.txt metrics.jsonl console.log rc; do
            [ -e "/tmp/runs/sglang_train/$f" ] && files+=("/tmp/runs/sglang_train/$f")
        done
        tar -czf "$OUT/engines.tgz" "${files[@]}" 2>/dev/null
    fi
    ;;
rollouts)
    N=${1:-256}; need_gsm8k
    DATA=outputs/data/engines_gsm8k
    ( source "${ENVF[vllm]}" 2>/dev/null || source "${ENVF[sglang]}"
      python3 -m extensions.data.gsm8k --input "$LONGFLOW_GSM8K_DIR/test.jsonl" --split test --output-dir "$DATA" \
          --agent-name long_workflow --interaction code_verify --limit "$N" ) || exit 1
    RES=$OUTDIR/engines; mkdir -p "$RES"
    for e in ${ENGINES:-sglang vllm}; do
        mkdir -p "$RES/$e"
        if [ "$e" = sglang ]; then SHARE[sglang]=$(sglang_share) || exit 2; fi
        echo "== $e: $N samples, ${SHARE[$e]}"
        ( [ -f "${ENVF[$e]}" ] || { echo "error: ${ENVF[$e]} missing: run install_on_gpu.sh for $e" >&2; exit 2; }
          source "${ENVF[$e]}"; export PYTHONPATH=$PWD:$PYTHONPATH
          python3 -m extensions.rollout experiments/gsm8k_code_verify --backend "$e" --data "$DATA/test.parquet" \
              --limit "$N" --batch-size "${BATCH:-64}" --out "$RES/$e" --max-error-rate 1 \
              "actor_rollout_ref.model.path=$MODEL" actor_rollout_ref.rollout.temperature=0 ${SHARE[$e]} ) \
              > "$RES/$e/driver.log" 2>&1
        echo $? > "$RES/$e/rc"; echo "   exit $(cat "$RES/$e/rc")"; tail -n 15 "$RES/$e/driver.log"
    done
    python3 scripts/gpu/engines_table.py "$RES" ${ENGINES:-sglang vllm}
    ;;
train)
    STEPS=${1:-5}; shift || true; need_gsm8k
    ( source "${ENVF[sglang]}" && PYTHON=python3 bash experiments/gsm8k_learn/prepare_data.sh ) || exit 1
    share=$(sglang_share) || exit 2
    LONGFLOW_ENV_FILE=${ENVF[sglang]} LONGFLOW_MODEL_PATH=$MODEL bash scripts/gpu/train_bg.sh sglang_train \
        actor_rollout_ref.rollout.name=sglang "trainer.total_training_steps=$STEPS" \
        actor_rollout_ref.rollout.skip_tokenizer_init=false \
        $share \
        trainer.val_before_train=false trainer.test_freq=-1 "$@"
    echo "then, back to back: OUT=\$OUT bash scripts/gpu/train_bg.sh --wait sglang_train 540"
    ;;
*)
    sed -n '2,21p' "$0"; exit 2 ;;
esac
