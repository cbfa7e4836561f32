#!/usr/bin/env bash
# Install Debian's headless-capable Chromium for the viewer's browser tests, if missing. Idempotent, quiet.
#   bash scripts/install_chromium.sh
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
