#!/usr/bin/env bash
# Set up (if needed) and run lint and the CPU test suite:
#   bash scripts/test.sh [pytest args]
# Installs what the tests need: .venv with the pack (scripts/setup.sh) and Debian's chromium
# for the viewer's browser test (scripts/install_chromium.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# GSM8K tests read a local copy through LONGFLOW_GSM8K_DIR; on our build machines it sits beside the checkout.
if [ -z "${LONGFLOW_GSM8K_DIR:-}" ] && [ -d ../shared/data/gsm8k ]; then
  LONGFLOW_GSM8K_DIR="$(cd ../shared/data/gsm8k && pwd)"
  export LONGFLOW_GSM8K_DIR
fi
bash scripts/setup.sh
bash scripts/install_chromium.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m extensions.config_check
.venv/bin/python -m pytest "$@"
