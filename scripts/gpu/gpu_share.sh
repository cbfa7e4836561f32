# How a rollout engine is sized when it shares the GPU with other runs (trainers, other engines), sourced by
# side_runs.sh and engines_side_by_side.sh: a fixed KV cache of KV_BYTES (6 GiB) instead of a share of the
# memory free at start-up, which the runs beside it change. SGLang's equivalent (max_total_tokens) is
# engines_side_by_side.sh's sglang_share.
KV_BYTES=${KV_BYTES:-6442450944}
VLLM_SHARE=(actor_rollout_ref.rollout.gpu_memory_utilization=0.15
  "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=$KV_BYTES")
