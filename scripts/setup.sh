#!/usr/bin/env bash
# Create .venv with the pack, its embedded CPU backend and its test tools (CPU torch), at the exact versions CI
# tested (requirements/ci-constraints.txt). Idempotent; ~2-4 min on a fresh machine, a second or two when .venv
# already holds what pyproject.toml and the constraints ask for (a stamp of their hash).
#   bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.longflow-setup
want="$(sha256sum pyproject.toml requirements/ci-constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -I -c "import extensions, verl, importlib.metadata as m; m.version('verl-longflow')" 2>/dev/null; then
  exit 0
fi
rm -f "$stamp"  # written again only after every install below succeeded
.venv/bin/python -m pip install -q --upgrade pip
# CPU build of torch first, so verl's torch requirement does not pull the CUDA wheels.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test,embedded,docs]" -c requirements/ci-constraints.txt
echo "$want" > "$stamp"
