#!/usr/bin/env bash
# Long workflows at scale on one 4-GPU (waves A-H, O, T, V-Z, a, d-f, i, n, p, v, w), 2-GPU (I-N, P-S, U, b, c, g, h, j-m, o, s-u, y) or 1-GPU machine (q, r, x), on experiments/gsm8k_learn's long-tail workload (python_exec behind a
# log-normal tool latency: tools_long_tail.yaml), turn_grpo, STEPS (10) steps each, the replay buffer polling every
# 50 ms. WAVES (default "A B", docs/results/long-tail-scaling-h200x4) run one after the other:
#   A, side by side: GPU 0 sync on 1 GPU (16 prompts x 8), GPU 1 colocate_async on 1 GPU (the same), GPUs 2-3 sync on
#     2 GPUs (32 x 8). The two 1-GPU runs validate greedily on all 1,319 GSM8K test problems at the end.
#   B: sync on all 4 GPUs (64 x 8).
#   C, side by side: A's 1-GPU runs with a second seed (data.seed=2, rollout.seed=43), validated, and
#     separate_async on GPUs 2-3 (1 trainer GPU + 1 rollout GPU), validated too.
#   D, side by side: GPUs 0-1 colocate_async on 2 GPUs (run as wave J), GPUs 2-3 sync on 2 GPUs (not run yet).
#   E: colocate_async on all 4 GPUs.
#   bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh               # install, then waves A and B
#   WAVES="C E" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh   # install ~4 min, C ~10, E ~8;
#     then, with C's runs beside A's:
#     python scripts/val_compare.py RESULTS --rescored sync=sync_x1,sync_x1_s2 colo=colo_x1,colo_x1_s2
#   F, side by side (not run yet), strong scaling (one GPU's batch, 16 prompts x 8, on 2 GPUs; the same samples as
#     sep_x1): GPUs 0-1 sync, GPUs 2-3 colocate_async.
#   G, side by side (not run yet), the folding workflow at scale (experiments/ledger_folding, VARIANT=fold, the
#     flagged ledgers in a 2K window, its gpus/ presets, FOLD_STEPS (6) steps, no validation: throughput only):
#     GPU 0 sync on 1 GPU, GPU 1 colocate_async on 1 GPU, GPUs 2-3 sync on 2 GPUs.
#   H, side by side (run with STEPS=8 to step 4: docs/results/long-workflow-modes-h200x4), the long_workflow loop with python_exec and a user (experiments/gsm8k_code_verify,
#     the code-verify user; 16 prompts x 8, two actor updates a step, STEPS steps, no validation): GPU 0 sync, GPU 1
#     colocate_async, GPUs 2-3 separate_async (1 trainer GPU + 1 rollout GPU): the loop in all three modes.
#   WAVES="D G H F" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh  # the next measurements
#     (install ~4 min, D ~8, G ~9, H ~9, F ~8: one 30-minute machine takes the install and two or three waves)
# Waves I to N and P to S need 2 GPUs only (a 2-GPU machine; each comparison within one machine):
#   I, side by side: A's two 1-GPU runs without validation (sync_x1_b, colo_x1_b: the 1-GPU baselines, on a machine
#     without A's runs).
#   J: colocate_async on 2 GPUs (D's first run).
#   K, side by side: the folding workflow (G's workload) sync on GPU 0, colocate_async on GPU 1.
#   L: folding under colocate_async on 2 GPUs.   M: folding sync on 2 GPUs.
#   N, side by side: folding's padding rows (docs/results/folding-scaling-h200x2: verl pads each batch to
#     ppo_mini_batch_size x 8 rows): sync on 1 GPU with verl's 128-token rows (GPU 0) and the pack's 2 (GPU 1);
#     compare timing_s/ (verl's perf/ token counts include the padding rows).
#   P: F's sync run alone (sync_x2_16).   Q: F's colocate_async run alone (colo_x2_16).
#   R, side by side: H's sync and colocate_async runs.   S: H's separate_async run alone.
# Wave O needs 4 GPUs: N's two runs on GPUs 0 and 1, and M's run on GPUs 2-3, side by side.
# Held-out accuracy, more seeds (A's and C's 1-GPU runs with data.seed=3 / rollout.seed=44 and 4 / 45, validated):
#   T (4 GPUs), side by side: sync_x1_s3, colo_x1_s3, sync_x1_s4, colo_x1_s4.   U (2 GPUs): seed 3's two runs.
#   then: python scripts/val_compare.py RESULTS --rescored sync=sync_x1,sync_x1_s2,sync_x1_s3,sync_x1_s4
#     colo=colo_x1,colo_x1_s2,colo_x1_s3,colo_x1_s4
# Wave V needs 4 GPUs: N's two runs on GPUs 0 and 1, R's on GPUs 2 and 3, side by side.
# The folding workflow on 4 GPUs and its strong scaling (G's workload; 4 GPUs each):
#   W: folding sync on 4 GPUs (64 ledgers x 8).   X: folding colocate_async on 4 GPUs.
#   Y, side by side, strong scaling (one GPU's batch, 16 ledgers x 8 and its mini-batch, on 2 GPUs): GPUs 0-1 sync,
#     GPUs 2-3 colocate_async.
# Z (4 GPUs), side by side: H's separate_async run (GPUs 0-1) and M's folding sync run on 2 GPUs (GPUs 2-3).
#   (verl's actor_rollout_ref.hybrid_engine=false, which would skip separate_async's replica on the trainer GPU,
#   stops verl 0.9.1 in its setup: config_check refuses it.)
# Is the synchronous tail the tool delay? The same runs with the long-tail tools minus their delay (tools_no_delay.yaml;
#   the *_nd runs), beside the delayed ones (the slowest trajectory's time split: longflow/rollout/slowest/*):
#   a (4 GPUs), side by side: sync_x1_nd (GPU 0), sync_x1_b (GPU 1), sync_x2_nd (GPUs 2-3, 32 x 8); then wave D on
#     the same machine (its sync_x2_b, the delayed 2-GPU run, has not reached a step yet) for weak scaling with and
#     without the delay on one machine: WAVES="a D".
#   b (2 GPUs), side by side: sync_x1_nd, sync_x1_b.   c (2 GPUs): sync_x2_nd (its delayed twin: wave A's sync_x2,
#     another machine).
# Folding's weak scaling on one machine with the pack's 2-token padding rows (folding-scaling-h200x2 ran verl's 128):
#   d (4 GPUs), side by side: fold_sync_x1 (GPU 0), fold_colo_x1 (GPU 1), fold_colo_x2 (GPUs 2-3). Before wave Z on
#     the same machine (its fold_sync_x2), STEPS=3 to bound Z's separate_async run: STEPS=3 WAVES="d Z".
# The folding runs with trainer.v1.whole_batch_update (the *_wb runs: the batch padded to the data-parallel ranks only,
#   one mini-batch; docs/results/folding-weak-scaling-h200x4 found verl's padding to 1,536 rows a GPU held weak
#   scaling at 2 GPUs to 1.66x), beside the same runs without it:
#   e (4 GPUs), side by side: fold_sync_x1 (GPU 0), fold_sync_x1_wb (GPU 1), fold_sync_x2_wb (GPUs 2-3).
#   f (4 GPUs), side by side: fold_colo_x1, fold_colo_x1_wb, fold_colo_x2_wb.   WAVES="e f" on one machine.
#   g (2 GPUs), side by side: fold_sync_x1, fold_sync_x1_wb.   h (2 GPUs): fold_sync_x2_wb.
#   i (4 GPUs): fold_sync_x4_wb, after wave e on the same machine (weak scaling at 1, 2 and 4 GPUs): WAVES="e i".
#   p (4 GPUs): fold_colo_x4_wb, after wave f, the same for colocate_async: WAVES="f p".
#   o (2 GPUs): fold_colo_x2_wb alone (its 1-GPU twin fold_colo_x1_wb ran in wave j on the same kind of machine).
#   A second seed of g's and h's whole-batch runs (data.seed=2, rollout.seed=43; docs/results/folding-whole-batch-h200x2
#   ran seed 1): j (2 GPUs), side by side: fold_sync_x1_wb_s2 (GPU 0), fold_colo_x1_wb (GPU 1).   k (2 GPUs):
#   fold_sync_x2_wb_s2.   WAVES="j k" on one machine.
# Folding under separate_async (1 trainer GPU + 1 rollout GPU, the whole-batch update, one actor update a step) beside
#   the synchronous trainer on the same 2 GPUs and the same 16 ledgers x 8 a step (its *_16 batch):
#   l (2 GPUs): fold_sep_x1_wb.   m (2 GPUs): fold_sync_x2_16_wb.   WAVES="l m" on one machine.
#   n (4 GPUs), side by side: fold_sync_x2_16_wb (GPUs 0-1), fold_sep_x1_wb (GPUs 2-3).
# What bounds the synchronous tail: the long-tail sync run on 1 GPU (I's sync_x1_b, STEPS steps) with its training
#   rollouts dumped (trainer.rollout_data_dir: each trajectory's text and score; v1's dump has no reason, which the
#   longflow/termination/ metrics give), without and with an 8-s bound on each trajectory (max_trajectory_s:
#   agent_loops_time_bound.yaml; tool calls cancelled at the bound):
#   q (1 GPU): sync_x1_dump.   r (1 GPU): sync_x1_bound8.   WAVES="q r" on a 1-GPU machine.
#   s (2 GPUs), side by side: sync_x1_dump (GPU 0), sync_x1_bound8 (GPU 1).
# Does the bound let the synchronous trainer scale (its weak scaling without it: 1.70x at 2 GPUs, 2.87x at 4)? The
#   bounded run with the batch grown with the GPUs (32 x 8 on 2, 64 x 8 on 4), after its 1-GPU twin on the same machine:
#   u (2 GPUs): sync_x2_bound8, after s: WAVES="s u".
#   v (4 GPUs), side by side: sync_x1_dump (GPU 0), sync_x1_bound8 (GPU 1), sync_x2_bound8 (GPUs 2-3).
#   w (4 GPUs): sync_x4_bound8, after v: WAVES="v w".
# The bound trains on the trajectories it cuts (score 0, so a slow tool call is penalised); mask_time_budget gives them
#   mask 0 instead (agent_loops_time_bound_masked.yaml). Not validated: the bound would apply to the 1,319 test
#   problems generated at once, and their queue alone can pass 8 s.
#   x (1 GPU): sync_x1_bound8_mask, after r: WAVES="r x".   y (2 GPUs), side by side: sync_x1_bound8 (GPU 0),
#   sync_x1_bound8_mask (GPU 1).
# Folding's update on 2 GPUs moved 6-9 % fewer tokens a second a rank than on 1 (folding-whole-batch-seed2-h200x2): these
#   runs had verl's defaults of fsdp.yaml, a gradient reduce-scatter after each of 18-30 micro-batches a rank and the
#   parameters gathered again for each backward (use_no_sync_for_gradient_accumulation false, reshard_after_forward
#   true). fold_sync_x2_wb_ns is h's fold_sync_x2_wb with one reduce-scatter a step and the parameters kept gathered
#   from forward to backward (ZeRO-2; a 0.5B model's gradients and parameters fit whole):
#   t (2 GPUs): fold_sync_x2_wb_ns.   WAVES="h t" on one 2-GPU machine: the two one after the other.
# A run has one command whatever wave starts it; a wave's runs take the GPUs in order:
#   WAVES="H F" bash scripts/gpu/scale_hold.sh plan   # each wave's runs and GPUs (no GPU needed)
#   WAVES="H F" bash scripts/gpu/scale_hold.sh dry    # each run's train_bg.sh line, nothing started
#   WAVES="K J L" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh
# The carry: python3 scripts/gpu/carry_plan.py --stage --with outputs/data/gsm8k_learn outputs/data/gsm8k_code_verify
#   --start 'WAVES="H F" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh' (a tree without docs/).
# Needs outputs/data/gsm8k_code_verify too for H (LONGFLOW_GSM8K_DIR=DIR: the two extensions.data.gsm8k lines of
# experiments/gsm8k_code_verify/run.sh).
#   OUT=$OUT bash scripts/gpu/scale_hold.sh status [SECONDS]       # progress, each run's weight-sync socket (two runs
#                                                                  # must show different ones); $OUT gets runs.tgz
# Needs outputs/data/gsm8k_learn (experiments/gsm8k_learn/prepare_data.sh) in the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-10}
WAVES=${WAVES:-A B}
runs_of() {  # WAVE: its runs, side by side, on the machine's GPUs in order (gpus_of each)
  case $1 in
  A) echo sync_x1 colo_x1 sync_x2 ;;
  B) echo sync_x4 ;;
  C) echo sync_x1_s2 colo_x1_s2 sep_x1 ;;
  D) echo colo_x2 sync_x2_b ;;
  E) echo colo_x4 ;;
  F) echo sync_x2_16 colo_x2_16 ;;
  G) echo fold_sync_x1 fold_colo_x1 fold_sync_x2 ;;
  H) echo verify_sync_x1 verify_colo_x1 verify_sep_x1 ;;
  I) echo sync_x1_b colo_x1_b ;;
  J) echo colo_x2 ;;
  K) echo fold_sync_x1 fold_colo_x1 ;;
  L) echo fold_colo_x2 ;;
  M) echo fold_sync_x2 ;;
  N) echo fold_pad128 fold_pad2 ;;
  O) echo fold_pad128 fold_pad2 fold_sync_x2 ;;
  P) echo sync_x2_16 ;;
  Q) echo colo_x2_16 ;;
  R) echo verify_sync_x1 verify_colo_x1 ;;
  S) echo verify_sep_x1 ;;
  T) echo sync_x1_s3 colo_x1_s3 sync_x1_s4 colo_x1_s4 ;;
  U) echo sync_x1_s3 colo_x1_s3 ;;
  V) echo fold_pad128 fold_pad2 verify_sync_x1 verify_colo_x1 ;;
  W) echo fold_sync_x4 ;;
  X) echo fold_colo_x4 ;;
  Y) echo fold_sync_x2_16 fold_colo_x2_16 ;;
  Z) echo verify_sep_x1 fold_sync_x2 ;;
  a) echo sync_x1_nd sync_x1_b sync_x2_nd ;;
  b) echo sync_x1_nd sync_x1_b ;;
  c) echo sync_x2_nd ;;
  d) echo fold_sync_x1 fold_colo_x1 fold_colo_x2 ;;
  e) echo fold_sync_x1 fold_sync_x1_wb fold_sync_x2_wb ;;
  f) echo fold_colo_x1 fold_colo_x1_wb fold_colo_x2_wb ;;
  g) echo fold_sync_x1 fold_sync_x1_wb ;;
  h) echo fold_sync_x2_wb ;;
  i) echo fold_sync_x4_wb ;;
  j) echo fold_sync_x1_wb_s2 fold_colo_x1_wb ;;
  k) echo fold_sync_x2_wb_s2 ;;
  l) echo fold_sep_x1_wb ;;
  m) echo fold_sync_x2_16_wb ;;
  n) echo fold_sync_x2_16_wb fold_sep_x1_wb ;;
  o) echo fold_colo_x2_wb ;;
  p) echo fold_colo_x4_wb ;;
  q) echo sync_x1_dump ;;
  r) echo sync_x1_bound8 ;;
  s) echo sync_x1_dump sync_x1_bound8 ;;
  t) echo fold_sync_x2_wb_ns ;;
  u) echo sync_x2_bound8 ;;
  v) echo sync_x1_dump sync_x1_bound8 sync_x2_bound8 ;;
  w) echo sync_x4_bound8 ;;
  x) echo sync_x1_bound8_mask ;;
  y) echo sync_x1_bound8 sync_x1_bound8_mask ;;
  *) echo "unknown wave $1 (A to Z, a to y)" >&2; exit 2 ;;
  esac
}
gpus_of() {  # RUN: how many GPUs it takes
  case $1 in
  sync_x4 | sync_x4_bound8 | colo_x4 | fold_sync_x4 | fold_colo_x4 | fold_sync_x4_wb | fold_colo_x4_wb) echo 4 ;;
  sync_x2 | sync_x2_b | sync_x2_nd | sync_x2_bound8 | colo_x2 | sync_x2_16 | colo_x2_16 | sep_x1 | fold_sync_x2 | fold_colo_x2 | fold_sync_x2_16 | \
    fold_colo_x2_16 | verify_sep_x1 | fold_sync_x2_wb | fold_colo_x2_wb | fold_sync_x2_wb_s2 | fold_sep_x1_wb | fold_sync_x2_16_wb | fold_sync_x2_wb_ns) echo 2 ;;
  *) echo 1 ;;
  esac
}
assign() {  # WAVE: "RUN DEVICES" a line, the wave's runs taking the GPUs in order
  local n next=0
  for n in $(runs_of "$1"); do
    echo "$n $(seq -s, "$next" $((next + $(gpus_of "$n") - 1)))"
    next=$((next + $(gpus_of "$n")))
  done
}
plan() {  # one line a wave: each run and its GPUs; fails when a wave needs more than 4
  local wave n devices line used
  for wave in $WAVES; do
    line=""; used=0
    while read -r n devices; do
      if [ "$(gpus_of "$n")" = 1 ]; then line+="${line:+, }$n (GPU $devices)"; else line+="${line:+, }$n (GPUs $devices)"; fi
      used=$((used + $(gpus_of "$n")))
    done < <(assign "$wave")
    [ "$used" -le 4 ] || { echo "wave $wave needs $used GPUs" >&2; exit 2; }
    echo "wave $wave, $used GPU(s): $line"
  done
}
RUNS=$(for wave in $WAVES; do runs_of "$wave"; done | tr '\n' ' ')
# shellcheck disable=SC2086
twice=$(printf '%s\n' $RUNS | sort | uniq -d | xargs)
[ -z "$twice" ] || { echo "WAVES=\"$WAVES\" run $twice twice (/tmp/runs/NAME): run those waves on separate machines" >&2; exit 2; }
case ${1:-run} in
plan) plan; exit 0 ;;
dry) DRY=1 ;;  # print each run's train_bg.sh line, start nothing
status)
  sleep "${2:-0}"
  bash scripts/gpu/background.sh --status 0 setup
  # shellcheck disable=SC2086
  bash scripts/gpu/train_bg.sh --status 0 $RUNS
  for n in $RUNS; do
    [ -f "/tmp/runs/$n/console.log" ] || continue
    echo "$n socket: $(grep -ao 'weight-sync socket: [^ ]*' "/tmp/runs/$n/console.log" | sort -u | tr '\n' ' ')"
  done
  exit 0
  ;;
run) ;;
*) echo "usage: [WAVES=...] bash scripts/gpu/scale_hold.sh [run | plan | dry | status [SECONDS]]" >&2; exit 2 ;;
esac
plan > /dev/null
if [ -z "${DRY:-}" ]; then
  source scripts/gpu/hold_start.sh
  hold_run_from_copy scale scripts/gpu/scale_hold.sh run
  hold_install "$(plan | sed -E 's/^wave [A-Za-z], ([0-9]) GPU.*/\1/' | sort -n | tail -n 1)"
fi
launch() {  # train_bg.sh's arguments (and the env the caller set): start the run, or print it (dry)
  if [ -z "${DRY:-}" ]; then bash scripts/gpu/train_bg.sh "$@"; return; fi
  local env=""
  for v in CUDA_VISIBLE_DEVICES VARIANT LEDGER_QUESTION TRAIN_COUNT TEST_COUNT; do [ -z "${!v:-}" ] || env+="$v=${!v} "; done
  echo "${env}train_bg.sh $*"
}
common=(algorithm.adv_estimator=turn_grpo "trainer.total_training_steps=$STEPS" trainer.val_before_train=false
  +ray_kwargs.ray_init.include_dashboard=false)
train() {  # NAME GPUS [overrides]: a run in the background on those GPUs, reading its own snapshot's files; a NAME
  # ending in _nd runs the long-tail tools without their delay (tools_no_delay.yaml)
  local name=$1 devices=$2 tools=tools_long_tail.yaml; shift 2
  [[ $name != *_nd ]] || tools=tools_no_delay.yaml
  CUDA_VISIBLE_DEVICES=$devices VARIANT=tools launch "$name" "${common[@]}" \
    "actor_rollout_ref.rollout.multi_turn.tool_config_path=/tmp/runs/$name/src/experiments/gsm8k_learn/$tools" "$@"
}
fold() {  # NAME GPUS [overrides]: a folding run (experiments/ledger_folding's run.sh writes its ledgers first)
  local name=$1 devices=$2; shift 2
  CUDA_VISIBLE_DEVICES=$devices VARIANT=ledger_fold LEDGER_QUESTION=flagged TRAIN_COUNT=1000 TEST_COUNT=128 \
    launch "$name" "trainer.total_training_steps=${FOLD_STEPS:-6}" trainer.val_before_train=false \
    trainer.test_freq=-1 +ray_kwargs.ray_init.include_dashboard=false actor_rollout_ref.model.enable_gradient_checkpointing=false \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 "$@"
}
verify() {  # NAME GPUS [overrides]: the code-verify workflow, gsm8k_learn's batch shape (scaling_report reads it)
  local name=$1 devices=$2; shift 2
  CUDA_VISIBLE_DEVICES=$devices VARIANT=code_verify launch "$name" \
    "trainer.total_training_steps=$STEPS" trainer.val_before_train=false trainer.test_freq=-1 \
    +ray_kwargs.ray_init.include_dashboard=false data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.rollout.n=8 actor_rollout_ref.rollout.agent.num_workers=4 "$@"
}
dumped() { echo "trainer.rollout_data_dir=/tmp/runs/$1/rollouts"; }   # RUN: its training rollouts, a file a step
bound8() {  # RUN [_masked]: each trajectory bounded to 8 s (max_trajectory_s: agent_loops_time_bound$2.yaml, its own snapshot's)
  echo "actor_rollout_ref.rollout.agent.agent_loop_config_path=/tmp/runs/$1/src/experiments/gsm8k_learn/agent_loops_time_bound${2:-}.yaml"
}
strong=(data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 trainer.test_freq=-1)
fold_strong=(data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=192)   # gpus/x1's batch
whole=(+trainer.v1.whole_batch_update=true)   # pad to the ranks only; the whole batch one mini-batch
gathered=(actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation=true   # one reduce-scatter a step
  actor_rollout_ref.actor.fsdp_config.reshard_after_forward=false)   # no second all-gather for the backward
# separate_async: one actor update a step on gpus/x1's 16 prompts (verl: train_batch_size = parameter_sync_step x
# ppo_mini_batch_size), taken whole: one AdamW step a training step, as the sync and colocate_async folding runs
fold_separate=(trainer.v1.separate_async.parameter_sync_step=1 actor_rollout_ref.actor.ppo_mini_batch_size=16)
validated=("trainer.test_freq=$STEPS")
seed2_unvalidated=(data.seed=2 actor_rollout_ref.rollout.seed=43)   # the folding runs validate nothing
seed2=("${seed2_unvalidated[@]}" "${validated[@]}")
seed3=(data.seed=3 actor_rollout_ref.rollout.seed=44 "${validated[@]}")
seed4=(data.seed=4 actor_rollout_ref.rollout.seed=45 "${validated[@]}")
start() {  # RUN DEVICES: each run's command, the same in every wave that has it
  local devices=$2
  case $1 in
  sync_x1) train sync_x1 "$devices" +gpus=x1 +mode=sync "${validated[@]}" ;;
  colo_x1) train colo_x1 "$devices" +gpus=x1 +mode=colocate_async "${validated[@]}" ;;
  sync_x1_b) train sync_x1_b "$devices" +gpus=x1 +mode=sync trainer.test_freq=-1 ;;
  colo_x1_b) train colo_x1_b "$devices" +gpus=x1 +mode=colocate_async trainer.test_freq=-1 ;;
  sync_x1_nd) train sync_x1_nd "$devices" +gpus=x1 +mode=sync trainer.test_freq=-1 ;;
  sync_x1_dump) train sync_x1_dump "$devices" +gpus=x1 +mode=sync trainer.test_freq=-1 "$(dumped sync_x1_dump)" ;;
  sync_x1_bound8) train "$1" "$devices" +gpus=x1 +mode=sync trainer.test_freq=-1 "$(dumped "$1")" "$(bound8 "$1")" ;;
  sync_x2_bound8) train "$1" "$devices" +gpus=x2 +mode=sync trainer.test_freq=-1 "$(dumped "$1")" "$(bound8 "$1")" ;;
  sync_x4_bound8) train "$1" "$devices" +gpus=x4 +mode=sync trainer.test_freq=-1 "$(dumped "$1")" "$(bound8 "$1")" ;;
  sync_x1_bound8_mask) train "$1" "$devices" +gpus=x1 +mode=sync trainer.test_freq=-1 "$(dumped "$1")" "$(bound8 "$1" _masked)" ;;
  sync_x2 | sync_x2_b | sync_x2_nd) train "$1" "$devices" +gpus=x2 +mode=sync trainer.test_freq=-1 ;;
  sync_x4) train sync_x4 "$devices" +gpus=x4 +mode=sync trainer.test_freq=-1 ;;
  sync_x1_s2) train sync_x1_s2 "$devices" +gpus=x1 +mode=sync "${seed2[@]}" ;;
  colo_x1_s2) train colo_x1_s2 "$devices" +gpus=x1 +mode=colocate_async "${seed2[@]}" ;;
  sync_x1_s3) train sync_x1_s3 "$devices" +gpus=x1 +mode=sync "${seed3[@]}" ;;
  colo_x1_s3) train colo_x1_s3 "$devices" +gpus=x1 +mode=colocate_async "${seed3[@]}" ;;
  sync_x1_s4) train sync_x1_s4 "$devices" +gpus=x1 +mode=sync "${seed4[@]}" ;;
  colo_x1_s4) train colo_x1_s4 "$devices" +gpus=x1 +mode=colocate_async "${seed4[@]}" ;;
  sep_x1) train sep_x1 "$devices" +gpus=x1 +mode=separate_async "${validated[@]}" ;;
  colo_x2) train colo_x2 "$devices" +gpus=x2 +mode=colocate_async trainer.test_freq=-1 ;;
  colo_x4) train colo_x4 "$devices" +gpus=x4 +mode=colocate_async trainer.test_freq=-1 ;;
  sync_x2_16) train sync_x2_16 "$devices" +gpus=x2 +mode=sync "${strong[@]}" ;;
  colo_x2_16) train colo_x2_16 "$devices" +gpus=x2 +mode=colocate_async "${strong[@]}" ;;
  fold_sync_x1) fold fold_sync_x1 "$devices" +gpus=x1 +mode=sync ;;
  fold_colo_x1) fold fold_colo_x1 "$devices" +gpus=x1 +mode=colocate_async ;;
  fold_sync_x2) fold fold_sync_x2 "$devices" +gpus=x2 +mode=sync ;;
  fold_colo_x2) fold fold_colo_x2 "$devices" +gpus=x2 +mode=colocate_async ;;
  fold_sync_x4) fold fold_sync_x4 "$devices" +gpus=x4 +mode=sync ;;
  fold_colo_x4) fold fold_colo_x4 "$devices" +gpus=x4 +mode=colocate_async ;;
  fold_sync_x2_16) fold fold_sync_x2_16 "$devices" +gpus=x2 +mode=sync "${fold_strong[@]}" ;;
  fold_colo_x2_16) fold fold_colo_x2_16 "$devices" +gpus=x2 +mode=colocate_async "${fold_strong[@]}" ;;
  fold_sync_x1_wb) fold fold_sync_x1_wb "$devices" +gpus=x1 +mode=sync "${whole[@]}" ;;
  fold_colo_x1_wb) fold fold_colo_x1_wb "$devices" +gpus=x1 +mode=colocate_async "${whole[@]}" ;;
  fold_sync_x2_wb) fold fold_sync_x2_wb "$devices" +gpus=x2 +mode=sync "${whole[@]}" ;;
  fold_colo_x2_wb) fold fold_colo_x2_wb "$devices" +gpus=x2 +mode=colocate_async "${whole[@]}" ;;
  fold_sync_x2_wb_ns) fold fold_sync_x2_wb_ns "$devices" +gpus=x2 +mode=sync "${whole[@]}" "${gathered[@]}" ;;
  fold_sync_x4_wb) fold fold_sync_x4_wb "$devices" +gpus=x4 +mode=sync "${whole[@]}" ;;
  fold_colo_x4_wb) fold fold_colo_x4_wb "$devices" +gpus=x4 +mode=colocate_async "${whole[@]}" ;;
  fold_sync_x1_wb_s2) fold fold_sync_x1_wb_s2 "$devices" +gpus=x1 +mode=sync "${whole[@]}" "${seed2_unvalidated[@]}" ;;
  fold_sync_x2_wb_s2) fold fold_sync_x2_wb_s2 "$devices" +gpus=x2 +mode=sync "${whole[@]}" "${seed2_unvalidated[@]}" ;;
  fold_sep_x1_wb) fold fold_sep_x1_wb "$devices" +gpus=x1 +mode=separate_async "${whole[@]}" "${fold_separate[@]}" ;;
  fold_sync_x2_16_wb) fold fold_sync_x2_16_wb "$devices" +gpus=x2 +mode=sync "${fold_strong[@]}" "${whole[@]}" ;;
  fold_pad128) fold fold_pad128 "$devices" +gpus=x1 +mode=sync +trainer.v1.padding_row_tokens=128 ;;
  fold_pad2) fold fold_pad2 "$devices" +gpus=x1 +mode=sync ;;
  verify_sync_x1) verify verify_sync_x1 "$devices" +mode=sync ;;
  verify_colo_x1) verify verify_colo_x1 "$devices" +mode=colocate_async ;;
  verify_sep_x1) verify verify_sep_x1 "$devices" +mode=separate_async ;;
  *) echo "no command for run $1" >&2; exit 2 ;;
  esac
}
for wave in $WAVES; do
  echo "== wave $wave ($(date +%T))"
  while read -r n devices; do start "$n" "$devices"; done < <(assign "$wave")
  [ -n "${DRY:-}" ] && continue
  for n in $(runs_of "$wave"); do while [ ! -f "/tmp/runs/$n/rc" ]; do sleep 5; done; done
done
echo "scale hold done ($(date +%T))"
