#!/usr/bin/env bash
# Create .venv with the pack and its test tools (CPU torch). Idempotent; ~2-4 min on a fresh machine.
#   bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# CPU build of torch first, so verl's torch requirement does not pull the CUDA wheels.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]"
