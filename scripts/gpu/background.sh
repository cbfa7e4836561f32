#!/usr/bin/env bash
# Run a command on the GPU machine in the background, so that the device call that starts it returns at once:
#   bash scripts/gpu/background.sh NAME command [args...]   # -> /tmp/bg/NAME.log, and /tmp/bg/NAME.rc when it ends
#   bash scripts/gpu/background.sh --status SECONDS NAME...  # wait until all end or SECONDS pass; each one's rc
#                                                             # (or "running") and the last lines of its log;
#                                                             # with $OUT set, each log is copied to $OUT/NAME.log
# Why: the machine goes back 30 s after a call returns, and a long call's return is where the next call is
# most likely to come late (docs/results/ledger-folding-h100: four machines lost that way in one session).
# A call that only starts work, followed by calls that sleep and poll (`--status 240 NAME`), leaves no idle gap
# longer than the time it takes to send the next call.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p /tmp/bg
if [ "${1:-}" = --status ]; then
  deadline=$(( $(date +%s) + $2 )); shift 2
  ended() { for n in "$@"; do [ -f "/tmp/bg/$n.rc" ] || return 1; done; }
  while ! ended "$@" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
  for n in "$@"; do
    echo "== $n: $([ -f "/tmp/bg/$n.rc" ] && echo "exit $(cat "/tmp/bg/$n.rc")" || echo running)"
    tail -n "${LINES_SHOWN:-6}" "/tmp/bg/$n.log" 2>/dev/null | tr '\r' '\n' | tail -n "${LINES_SHOWN:-6}" | cut -c1-300
    [ -n "${OUT:-}" ] && cp "/tmp/bg/$n.log" "$OUT/$n.log" 2>/dev/null
  done
  exit 0
fi
[ $# -ge 2 ] || { echo "usage: bash scripts/gpu/background.sh NAME command [args...] | --status SECONDS NAME..." >&2; exit 2; }
name=$1; shift
rm -f "/tmp/bg/$name.rc"
(setsid nohup bash -c '"$@" > "/tmp/bg/$0.log" 2>&1; echo $? > "/tmp/bg/$0.rc"' "$name" "$@" < /dev/null > /dev/null 2>&1 &)
echo "started $name in the background: /tmp/bg/$name.log"
