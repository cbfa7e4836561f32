#!/usr/bin/env bash
# Context folding from a warm start on a ONE-GPU machine, started in the background (scripts/gpu/background.sh):
#   bash scripts/gpu/background.sh setup bash scripts/gpu/warm_start_hold.sh
#   OUT=$OUT bash scripts/gpu/warm_start_hold.sh status [SECONDS]   # polls: waits SECONDS (0), then progress;
#       $OUT gets setup.log, sft/ (steps, summary), demos.tgz, runs.tgz (the trainer under ledger_fold/, its training rollouts
#       included: trainer.rollout_data_dir), side_ledger.tgz
# 1. install (wheels, check, model);
# 2. demonstrations: $DEMO_COUNT (160) flagged training ledgers of seed 1 (the trainer's are seed 0) through
#    folding_flagged, played by the scripted demonstrator (python -m extensions.rollout --backend demo): what the
#    tools show, never the answer key;
# 3. supervised fine-tuning of the embedded model on their trained tokens (python -m extensions.warm_start.sft)
#    -> /tmp/sft_model, which every later run uses (LONGFLOW_MODEL_PATH);
# 4. on the same GPU at once: GRPO of the fold variant on LEDGER_QUESTION's ledgers for $STEPS (30) steps at 8 x 4,
#    validated at steps $TEST_FREQ (15) and 30; and the rollout driver on the $TEST_COUNT (128) held-out ledgers, greedy: ReAct
#    truncated, folding before GRPO, ReAct wide (scripts/gpu/side_runs.sh, a fixed KV cache of KV_BYTES;
#    SIDE_VARIANTS picks them, "none" runs the trainer alone; VAL_BEFORE_TRAIN=true validates the warm start in the
#    trainer too).
# STEPS=0 runs no trainer (the side runs alone: docs/results/ledger-warm-start-h100).
# MINI_BATCH (96): actor.ppo_mini_batch_size. verl's v1 trainer takes one optimizer step per ppo_mini_batch_size x n
# ROWS, and a folded trajectory is one row per segment. 96 (8 ledgers x 12 segments, the most a step can have) gives
# one optimizer step per training step, as without folding; verl pads the rest with no-op rows. At 8, a step of ~6
# segments a trajectory took 5-12 AdamW steps and folding fell from 126/128 to 94/128 in 30 steps
# (docs/results/ledger-fold-grpo30-h100); at 96 it held 128/128 (docs/results/ledger-fold-grpo30-mb96-h100).
# EVAL_TRAINED=1 saves the last step's weights (Hugging Face form) and, once the trainer has exited, runs them through
# the rollout driver in a fresh vLLM on the same held-out ledgers (folding, greedy; status writes $OUT/side_trained.tgz):
# the step-30 validation runs through the trainer's own engine, and docs/results/ledger-fold-grpo30-h100 could not
# tell a policy that got worse from an engine serving other weights than the trainer's. It ran on 2026-11-26 without
# VAL_ALSO and with bypass_mode left at true: the trainer exited at about 25 min held and the driver finished at 29.2
# (docs/results/ledger-fold-grpo30-mb96-h100/fold_grpo_rescored): there is no room for more in that hold.
# A warm start brought back and carried (scripts/gpu/model_parts.py; carry_plan.py --groups wheels,sft): steps 2-3
# are skipped and every run starts from those weights (the install's `sft` step checks their sha256), ~3.5 min saved.
# DEMOS_FILE=F (.jsonl or .jsonl.xz, e.g. a copy of docs/results/ledger-warm-start-h100/demos/trajectories.jsonl.xz
# outside docs/results, which park_results.sh moves away; an untracked file in the tree travels):
# fine-tune on those demonstrations instead of making them (they are deterministic: identical in every hold so far).
# RETURN_MODEL=1 packs the fine-tuned model into /tmp/sft_return; then each
#   OUT=$OUT bash scripts/gpu/warm_start_hold.sh send   # brings back the next 62 MiB of it (~16 calls, ~5 s each)
# and here: python3 scripts/gpu/model_parts.py collect FILES_AT... --model .whl-gpu/sft_model --parts .whl-gpu/sft-parts
# Measured: 58 carry calls ~5.6-6.2 min; install + demonstrations + SFT ~4.5-5 min; trainer start and step-0
# validation ~4.5 min. Beside the side runs a step took 25-45 s and 30 steps did not fit one 30-minute hold
# (docs/results/ledger-warm-start-h200). Alone, with SIDE_VARIANTS=none TEST_FREQ=30 VAL_BEFORE_TRAIN=true and
# TRAIN_ARGS="actor_rollout_ref.model.enable_gradient_checkpointing=false actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192",
# 30 steps took 11 min (median 21.4 s) and the whole hold 29.6 min of 30 (docs/results/ledger-grpo30-h200): a tight fit.
# With docs/results parked (scripts/gpu/park_results.sh) the carry is 35 calls, 3.3 min; on an H100 the trainer started
# at 9.1 min held and finished step 2 at 15.4 min (docs/results/ledger-h100-lost-hold): the whole plan no longer fits
# one hold. docs/results/ledger-fold-grpo30-h100/README.md splits it in two, with VAL_ALSO=truncated (the
# baseline in the trainer's validation, experiments/ledger_folding/run.sh) and a carried warm start; the split ran
# in one session on 2026-11-26 (27.7 + 12.6 min held).
set -euo pipefail
cd "$(dirname "$0")/../.."
export LEDGER_QUESTION=${LEDGER_QUESTION:-flagged} TEST_COUNT=${TEST_COUNT:-128} TRAIN_COUNT=${TRAIN_COUNT:-1000}
export LEDGER_TRAIN_ARGS=${LEDGER_TRAIN_ARGS:---min-pages 30}   # the held-out ledgers' length (the curriculum
# of 1 to 30 pages paid for answering after page 1: docs/results/ledger-flagged-h200)
SFT=${SFT_DIR:-/tmp/sft_model} DEMOS=/tmp/demos
case ${1:-run} in
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT/sft"; cp "$SFT"/sft_steps.csv "$SFT"/sft_summary.json "$OUT/sft/" 2>/dev/null || true
    [ -d "$DEMOS/out" ] && { tar -czf "$OUT/demos.tgz" -C "$DEMOS" out || true; }
  fi
  tail -n 2 "$SFT/sft_steps.csv" 2>/dev/null | sed 's/^/sft: /' || true
  bash scripts/gpu/train_bg.sh --status 0 ledger_fold
  echo "== side_ledger"; SIDE=/tmp/side_ledger bash scripts/gpu/side_runs.sh status
  [ -d /tmp/side_trained ] && { echo "== side_trained"; SIDE=/tmp/side_trained bash scripts/gpu/side_runs.sh status; }
  exit 0
  ;;
send)
  python3 scripts/gpu/model_parts.py send /tmp/sft_return "${OUT:?OUT: the output folder of the device call}"
  exit 0
  ;;
run) ;;
*) echo "usage: bash scripts/gpu/warm_start_hold.sh [run | status [SECONDS] | send]" >&2; exit 2 ;;
esac
carried=0
[ -f "${LONGFLOW_PARTS:-/tmp/longflow-parts}/SFT-MODEL.sha256" ] && carried=1   # the warm start came with the carry calls
if [ $carried = 1 ]; then default_steps=wheels,check,sft; else default_steps=wheels,check,model; fi
LONGFLOW_STEPS=${INSTALL_STEPS:-$default_steps} LONGFLOW_SFT_DIR=$SFT bash scripts/gpu/install_on_gpu.sh
source "${LONGFLOW_ENV_FILE:-/tmp/longflow-env.sh}"
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
base=${LONGFLOW_MODEL_PATH:-/tmp/longflow/qwen25-coder-0.5b-instruct}
source experiments/ledger_folding/task.sh   # LEDGER_ARGS, WINDOW_ARGS, FOLD_LOOP
if [ $carried = 1 ]; then
  [ -f "$SFT/config.json" ] || { echo "a warm start was carried but $SFT holds no model: INSTALL_STEPS needs sft" >&2; exit 1; }
  echo "== the carried warm start in $SFT ($(date +%T))"
elif [ -n "${DEMOS_FILE:-}" ]; then
  echo "== demonstrations from $DEMOS_FILE ($(date +%T))"
  mkdir -p "$DEMOS/out"
  case $DEMOS_FILE in *.xz) xz -dc "$DEMOS_FILE" ;; *) cat "$DEMOS_FILE" ;; esac > "$DEMOS/out/trajectories.jsonl"
else
  echo "== demonstrations ($(date +%T))"
  # shellcheck disable=SC2086  # option lists
  python3 -m extensions.data.ledger --output-dir "$DEMOS/data" --split train --seed 1 --count "${DEMO_COUNT:-160}" \
    --agent-name "$FOLD_LOOP" $LEDGER_ARGS $LEDGER_TRAIN_ARGS
  # shellcheck disable=SC2086
  LONGFLOW_MODEL_PATH=$base python3 -m extensions.rollout experiments/ledger_folding --backend demo \
    --data "$DEMOS/data/train.parquet" --batch-size 64 --out "$DEMOS/out" --no-html $WINDOW_ARGS
fi
if [ $carried = 0 ]; then
  echo "== sft ($(date +%T))"
  python3 -m extensions.warm_start.sft --records "$DEMOS/out/trajectories.jsonl" --model "$base" --out "$SFT" \
    --epochs "${SFT_EPOCHS:-3}" --lr "${SFT_LR:-2e-5}"
  if [ "${RETURN_MODEL:-0}" = 1 ]; then python3 scripts/gpu/model_parts.py pack "$SFT" /tmp/sft_return; fi
fi
export LONGFLOW_MODEL_PATH=$SFT
if [ "${STEPS:-30}" != 0 ]; then   # STEPS=0: no trainer (the side runs alone)
  save=() ckpt=/tmp/runs/ledger_fold/ckpt   # EVAL_TRAINED=1: the last step's weights, Hugging Face form only
  [ "${EVAL_TRAINED:-0}" = 1 ] && save=("trainer.save_freq=${STEPS:-30}" "trainer.default_local_dir=$ckpt"
    "actor_rollout_ref.actor.checkpoint.save_contents=[hf_model]")
  echo "== folding, trained from the warm start ($(date +%T))"
  # shellcheck disable=SC2086  # TRAIN_ARGS: more hydra overrides (the header says which made steps faster)
  VARIANT=ledger_fold bash scripts/gpu/train_bg.sh ledger_fold \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.35 data.train_batch_size=8 actor_rollout_ref.rollout.n=4 \
    "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI_BATCH:-96}" "trainer.total_training_steps=${STEPS:-30}" \
    "trainer.test_freq=${TEST_FREQ:-15}" "trainer.val_before_train=${VAL_BEFORE_TRAIN:-false}" +ray_kwargs.ray_init.include_dashboard=false \
    trainer.rollout_data_dir=/tmp/runs/ledger_fold/rollouts ${TRAIN_ARGS:-} ${save[@]+"${save[@]}"}   # the training rollouts, for what went wrong
  if [ "${EVAL_TRAINED:-0}" = 1 ]; then   # the trained weights in a fresh engine, once the trainer has exited (rc 0)
    # EVAL_ARGS: more overrides for it (side_runs.sh SIDE_ARGS)
    KV_BYTES=${KV_BYTES:-17179869184} SIDE=/tmp/side_trained LEDGERS=$TEST_COUNT LEDGER_VARIANTS=fold ASK_VARIANTS=none \
      SIDE_ARGS=${EVAL_ARGS:-} DELAY_S=0 WAIT_FOR=/tmp/runs/ledger_fold/rc LONGFLOW_MODEL_PATH=$ckpt/global_step_${STEPS:-30}/actor/huggingface bash scripts/gpu/side_runs.sh start
  fi
fi
variants=${SIDE_VARIANTS:-truncated fold wide}   # "none": the trainer alone (the baselines measured already)
if [ "$variants" != none ]; then
  echo "== $variants ($(date +%T))"
  KV_BYTES=${KV_BYTES:-17179869184} SIDE=/tmp/side_ledger LEDGERS=$TEST_COUNT LEDGER_VARIANTS="$variants" \
    ASK_VARIANTS=none DELAY_S=${DELAY_S:-90} bash scripts/gpu/side_runs.sh start
fi
echo "warm start hold started ($(date +%T))"
