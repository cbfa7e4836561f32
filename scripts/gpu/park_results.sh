#!/usr/bin/env bash
# Move the committed results out of the working tree for a hold, and back after (run HERE, not there).
#   bash scripts/gpu/park_results.sh park      # before the first carry call of a hold
#   bash scripts/gpu/park_results.sh restore   # after the last call of the hold
# Every device call carries the working tree; docs/results is ~30 of its ~33 MiB (2026-11-26), which leaves a
# call only ~30 MiB for a part. Parked, the tree is ~3 MiB: 58M parts, 35 carry calls instead of 58 (~2 min of held
# time saved). Nothing of a hold reads docs/results (pass DEMOS_FILE from a copy that travels, if you need one).
# Commit nothing while parked: git sees every result as deleted.
set -euo pipefail
cd "$(dirname "$0")/../.."
park=${LONGFLOW_PARK_DIR:-$(cd .. && pwd)/.longflow-parked-results}
case ${1:-} in
park)
  [ -e "$park" ] && { echo "error: $park exists: restore (or move) it first" >&2; exit 1; }
  [ -z "$(git status --porcelain -- docs/results)" ] || { echo "error: docs/results has uncommitted changes: commit them first" >&2; exit 1; }
  mv docs/results "$park"
  echo "parked docs/results in $park; working tree now $(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1) bytes"
  ;;
restore)
  [ -d "$park" ] || { echo "error: nothing parked at $park" >&2; exit 1; }
  [ -e docs/results ] && { echo "error: docs/results exists again: merge $park into it by hand" >&2; exit 1; }
  mv "$park" docs/results
  echo "restored docs/results"
  ;;
*) echo "usage: bash scripts/gpu/park_results.sh park | restore" >&2; exit 2 ;;
esac
