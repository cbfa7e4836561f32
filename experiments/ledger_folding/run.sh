#!/usr/bin/env bash
# The paged-ledger comparison (config.yaml says what each variant is):
#   [LEDGER_QUESTION=balance|lookup|flagged] VARIANT=fold|truncated|wide bash experiments/ledger_folding/run.sh [hydra overrides]
#   TRAIN_COUNT (2000) / TEST_COUNT (256): ledgers written for each split, shaped by task.sh (the same seeds: a smaller test
#   set is the first ledgers of the larger one)
set -euo pipefail
cd "$(dirname "$0")/../.."
VARIANT=${VARIANT:-fold}
PY=${PYTHON:-python}
source experiments/ledger_folding/task.sh   # LEDGER_ARGS and FOLD_LOOP: the ledgers' shape, LEDGER_QUESTION's loop
case $VARIANT in
  fold) agent=$FOLD_LOOP; extra=() ;;
  truncated) agent=react; extra=() ;;
  wide) agent=react; extra=(data.max_response_length=$WIDE_RESPONSE actor_rollout_ref.rollout.response_length=$WIDE_RESPONSE) ;;
  *) echo "VARIANT=$VARIANT: expected fold, truncated or wide" >&2; exit 2 ;;
esac
question=${LEDGER_QUESTION:-balance}
data=outputs/data/ledger/$question/$VARIANT   # the same ledgers in each (same seeds); the agent_name column picks the loop
# shellcheck disable=SC2086  # LEDGER_ARGS is a list of options
{
  "$PY" -m extensions.data.ledger --output-dir $data --split train --count "${TRAIN_COUNT:-2000}" --agent-name $agent $LEDGER_ARGS $LEDGER_TRAIN_ARGS
  "$PY" -m extensions.data.ledger --output-dir $data --split test --count "${TEST_COUNT:-256}" --agent-name $agent $LEDGER_ARGS
}
"$PY" -m verl.trainer.main_ppo --config-path "$PWD/experiments/ledger_folding" --config-name config \
  "data.train_files=$PWD/$data/train.parquet" "data.val_files=$PWD/$data/test.parquet" \
  "actor_rollout_ref.rollout.multi_turn.tool_config_path=$PWD/tool_configs/ledger.yaml" \
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/experiments/ledger_folding/agent_loops.yaml" \
  "actor_rollout_ref.rollout.agent.default_agent_loop=$agent" "trainer.experiment_name=ledger_folding_${question}_$VARIANT" \
  $WINDOW_ARGS "${extra[@]}" "$@"
