# How a 4-GPU hold script starts, sourced by ab_hold.sh and scale_hold.sh from the repo root (and by train_bg.sh and
# side_runs.sh for snapshot_tree):
#   snapshot_tree DEST                      copy the tree (no .git, .venv or wheelhouse) into DEST, which must exist
#   hold_run_from_copy NAME SCRIPT [ARGS]   re-run SCRIPT from a snapshot of the tree in /tmp/NAME-src (a later device
#                                           call replaces the tree under a running script); inside the copy, returns
#   hold_install GPUS                       stop unless the machine has GPUS GPUs; then the offline install

snapshot_tree() {
  tar --exclude=./.whl-gpu --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$1"
}

hold_run_from_copy() {
  local name=$1 script=$2
  shift 2
  [ -z "${LONGFLOW_HOLD_COPY:-}" ] || return 0
  rm -rf "/tmp/$name-src" && mkdir -p "/tmp/$name-src"
  snapshot_tree "/tmp/$name-src"
  cd "/tmp/$name-src" && LONGFLOW_HOLD_COPY=1 exec bash "$script" "$@"
}

hold_install() {
  local gpus
  gpus=$(nvidia-smi -L | wc -l)
  [ "$gpus" -ge "$1" ] || { echo "error: $gpus GPU(s) here; this hold needs $1" >&2; exit 2; }
  LONGFLOW_STEPS=wheels,check,model bash scripts/gpu/install_on_gpu.sh
}
