#!/usr/bin/env bash
# The paged-ledger comparison (config.yaml says what each variant is):
#   [LEDGER_QUESTION=balance|lookup|flagged] VARIANT=fold|truncated|wide bash experiments/ledger_folding/run.sh [hydra overrides]
#   TRAIN_COUNT (2000) / TEST_COUNT (256): ledgers written for each split, shaped by task.sh (the same seeds: a smaller test
#   set is the first ledgers of the larger one)
#   VAL_ALSO="truncated": the same held-out ledgers again in the validation set, through that variant's loop (the window
#   is the run's), labelled data_source longflow/ledger@truncated: verl reports the baseline apart, at every
#   validation, on the same weights (wide needs its own window: the rollout driver runs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
VARIANT=${VARIANT:-fold}
PY=${PYTHON:-python}
source experiments/ledger_folding/task.sh   # LEDGER_ARGS and FOLD_LOOP: the ledgers' shape, LEDGER_QUESTION's loop
case $VARIANT in
  fold) agent=$FOLD_LOOP; extra=() ;;   # config.yaml's ppo_mini_batch_size: one AdamW step for up to 12 segments
  truncated) agent=react; extra=(actor_rollout_ref.actor.ppo_mini_batch_size=16) ;;   # a row a trajectory: one step
  wide) agent=react; extra=(actor_rollout_ref.actor.ppo_mini_batch_size=16
          data.max_response_length=$WIDE_RESPONSE actor_rollout_ref.rollout.response_length=$WIDE_RESPONSE) ;;
  *) echo "VARIANT=$VARIANT: expected fold, truncated or wide" >&2; exit 2 ;;
esac
question=${LEDGER_QUESTION:-balance}
data=outputs/data/ledger/$question/$VARIANT   # the same ledgers in each (same seeds); the agent_name column picks the loop
# shellcheck disable=SC2086  # LEDGER_ARGS is a list of options
{
  "$PY" -m extensions.data.ledger --output-dir $data --split train --count "${TRAIN_COUNT:-2000}" --agent-name $agent $LEDGER_ARGS $LEDGER_TRAIN_ARGS
  "$PY" -m extensions.data.ledger --output-dir $data --split test --count "${TEST_COUNT:-256}" --agent-name $agent $LEDGER_ARGS
}
val_files=$PWD/$data/test.parquet
for also in ${VAL_ALSO:-}; do
  case $also in
    truncated) also_agent=react ;;
    fold) also_agent=$FOLD_LOOP ;;
    *) echo "VAL_ALSO=$VAL_ALSO: expected truncated or fold (wide needs its own window)" >&2; exit 2 ;;
  esac
  [ "$also" = "$VARIANT" ] && { echo "VAL_ALSO=$also: the run's own variant is validated already" >&2; exit 2; }
  [ "$VARIANT" = wide ] && { echo "VAL_ALSO=$also: a wide run's window is not $also's" >&2; exit 2; }
  # shellcheck disable=SC2086
  "$PY" -m extensions.data.ledger --output-dir "$data/val_$also" --split test --count "${TEST_COUNT:-256}" \
    --agent-name "$also_agent" --label "$also" $LEDGER_ARGS
  val_files="$val_files,$PWD/$data/val_$also/test.parquet"
done
"$PY" -m verl.trainer.main_ppo --config-path "$PWD/experiments/ledger_folding" --config-name config \
  "data.train_files=$PWD/$data/train.parquet" "data.val_files=[$val_files]" \
  "actor_rollout_ref.rollout.multi_turn.tool_config_path=$PWD/tool_configs/ledger.yaml" \
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/experiments/ledger_folding/agent_loops.yaml" \
  "actor_rollout_ref.rollout.agent.default_agent_loop=$agent" "trainer.experiment_name=ledger_folding_${question}_$VARIANT" \
  $WINDOW_ARGS "${extra[@]}" "$@"
