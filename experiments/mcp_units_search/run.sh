#!/usr/bin/env bash
# Train with stock verl on the MCP units-and-search problems (GPU, vLLM):
#   bash experiments/mcp_units_search/run.sh [hydra overrides]
# The problems ship in problems.jsonl; the MCP example server is started by each rollout worker.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=experiments/mcp_units_search
python -m verl.trainer.main_ppo --config-path "$PWD/$EXP" --config-name config "$@"
