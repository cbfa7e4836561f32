#!/usr/bin/env bash
# Run the test suite N times in a row and count the passes (flakiness check):
#   bash scripts/repeat_tests.sh 20 [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}; shift || true
passed=0
for i in $(seq "$n"); do
  if .venv/bin/python -m pytest -q -p no:cacheprovider "$@" > "/tmp/repeat_tests.$i.log" 2>&1; then
    passed=$((passed + 1)); echo "run $i: passed ($(tail -1 /tmp/repeat_tests.$i.log))"
  else
    echo "run $i: FAILED (log: /tmp/repeat_tests.$i.log)"; grep -E "^(FAILED|ERROR)" "/tmp/repeat_tests.$i.log"
  fi
done
echo "$passed of $n runs passed"
[ "$passed" -eq "$n" ]
