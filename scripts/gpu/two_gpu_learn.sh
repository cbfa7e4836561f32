#!/usr/bin/env bash
# Two GPUs against one through Ray and FSDP, on a machine with two GPUs,
# after install_on_gpu.sh, started in the background like train_bg.sh:
#   bash scripts/gpu/two_gpu_learn.sh              # two_gpu: 2 GPUs, then one_gpu: the same on GPU 0 alone
#   bash scripts/gpu/train_bg.sh --status 540 two_gpu one_gpu    # progress, GPU memory, files to $OUT
# experiments/gsm8k_learn (code-fence python_exec), v1 trainer, vLLM, turn_grpo (so per-turn advantages
# and longflow/ metrics are exercised), STEPS steps (default 12) without validation; the one-GPU run starts
# when the two-GPU run has ended. NVLink multicast stays off in every process: /tmp/longflow-env.sh
# (install_on_gpu.sh) exports NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1,
# and train_bg.sh sources it. Per-rank GPU memory: the nvidia-smi lines of --status, and verl's
# actor/perf/max_memory_allocated_gb per step in metrics.jsonl. Its measured successor is scale_hold.sh (docs/results/long-tail-scaling-h200x4).
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-12}
common=("trainer.total_training_steps=$STEPS" trainer.test_freq=-1 trainer.val_before_train=false
  algorithm.adv_estimator=turn_grpo)
VARIANT=tools bash scripts/gpu/train_bg.sh two_gpu trainer.n_gpus_per_node=2 "${common[@]}"
(setsid nohup bash -c 'while [ ! -f /tmp/runs/two_gpu/rc ]; do sleep 10; done
  CUDA_VISIBLE_DEVICES=0 VARIANT=tools bash scripts/gpu/train_bg.sh one_gpu trainer.n_gpus_per_node=1 "$@"' \
  _ "${common[@]}" < /dev/null > /tmp/runs/one_gpu.launch.log 2>&1 &)
echo "one_gpu starts when two_gpu ends (/tmp/runs/one_gpu.launch.log)"
