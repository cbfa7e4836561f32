"""Where generation happens for the rollout driver.

- ``hf`` (the default without a GPU): verl's real AgentLoopWorker in this process, its LLM
  client an in-process transformers server (``extensions.backends.hf_server.HFServer``).
- ``vllm`` / ``sglang``: verl's own LLMServerManager (standalone servers) and
  AgentLoopManager with its Ray workers, exactly as the trainer uses them; the backend's name
  becomes ``actor_rollout_ref.rollout.name``, so verl builds its vLLMReplica or SGLangReplica.
  The engine must be importable (``ENGINE_INSTALL`` says how to install it), else
  ``EngineNotInstalled`` is raised before Ray starts.
- ``demo``: verl's real AgentLoopWorker in this process, its LLM client a scripted demonstrator
  (``extensions.backends.demo_server.DemoServer`` around ``--demo-policy``): no model runs, only
  the tokenizer of ``actor_rollout_ref.model.path`` (warm-start demonstrations, ``extensions/warm_start``).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from typing import Any, Protocol

from omegaconf import DictConfig, open_dict
from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto

from extensions.errors import ConfigError, LongflowError
from extensions.placement_check import replica_sizes
from extensions.verl_compat import accept_segment_lists, segment_list_manager
from extensions.verl_config import build_agent_loop_worker

logger = logging.getLogger(__name__)
MODEL_BACKENDS = ("hf", "vllm", "sglang")  # the ones that run a model
BACKENDS = (*MODEL_BACKENDS, "demo")
ENGINE_INSTALL = {
    "vllm": "pip install -e '.[vllm]'  (README: Use it from an existing verl command)",
    "sglang": (
        "uv pip install -e '.[sglang]' --override scripts/gpu/overrides-sglang.txt  "
        "(sglang 0.5.12 pins transformers==5.6.0, which verl 0.9.1 excludes; README: SGLang)"
    ),
}


class EngineNotInstalled(LongflowError):
    """--backend vllm/sglang was asked for, but that engine's Python package cannot be imported."""


def require_engine(name: str) -> None:
    """Raise ``EngineNotInstalled`` (with the install recipe) when ``name``'s package is not importable."""
    if importlib.util.find_spec(name) is None:
        raise EngineNotInstalled(
            f"--backend {name}: the {name!r} package is not installed in this Python ({sys.executable}). "
            f"Install it with: {ENGINE_INSTALL[name]}; or choose another backend: {', '.join(MODEL_BACKENDS)}"
        )


def set_engine(config: DictConfig, name: str) -> None:
    """Point verl's rollout at engine ``name`` with the checkpoint loaded by the server itself."""
    with open_dict(config):
        config.actor_rollout_ref.rollout.name = name
        # verl starts rollout servers on dummy weights and the trainer syncs the real ones;
        # with no trainer, the server must load the checkpoint itself.
        config.actor_rollout_ref.rollout.load_format = "auto"
        if name == "sglang":  # stop strings (code fences, the policy user's turn markers): extensions/engine_rules.py
            config.actor_rollout_ref.rollout.skip_tokenizer_init = False
        if int(config.actor_rollout_ref.rollout.get("nnodes", 0) or 0) < 1:
            config.actor_rollout_ref.rollout.nnodes = 1  # standalone servers, not colocated


class Backend(Protocol):
    tokenizer: Any

    async def generate(self, batch: DataProto) -> DataProto: ...

    def close(self) -> None: ...


class InProcessBackend:
    """verl's AgentLoopWorker in this process, driven by any ``generate``-compatible client."""

    def __init__(self, config: DictConfig, llm_client: Any):
        self.worker = accept_segment_lists(build_agent_loop_worker(config, llm_client=llm_client))
        self.tokenizer = self.worker.tokenizer
        self.llm_client = llm_client

    async def generate(self, batch: DataProto) -> DataProto:
        return await self.worker.generate_sequences(batch)

    def close(self) -> None:
        close = getattr(self.llm_client, "close", None)
        if callable(close):
            close()


class ServerBackend:
    """verl's AgentLoopManager over standalone vLLM/SGLang servers (GPU, Ray)."""

    def __init__(self, config: DictConfig, engine: str):
        require_engine(engine)
        import ray
        from verl.workers.rollout.llm_server import LLMServerManager

        set_engine(config, engine)
        check_server_replicas(config)
        self.engine = engine
        if not ray.is_initialized():
            ray.init(runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "true", "VLLM_LOGGING_LEVEL": "WARN"}})
        self.server_manager = LLMServerManager.create(config=config)
        manager = segment_list_manager()  # a folding loop's list of segments becomes one record
        self.manager = manager.create(config=config, llm_client=self.server_manager.get_client())
        self.num_workers = int(config.actor_rollout_ref.rollout.agent.num_workers)
        from verl.utils import hf_tokenizer

        self.tokenizer = hf_tokenizer(config.actor_rollout_ref.model.path)

    async def generate(self, batch: DataProto) -> DataProto:
        padded, pad = pad_dataproto_to_divisor(batch, self.num_workers)
        out = await self.manager.generate_sequences(padded)
        return unpad_dataproto(out, pad)

    def close(self) -> None:
        import ray

        ray.shutdown()


def check_server_replicas(config: DictConfig) -> int:
    """How many standalone server replicas verl's LLMServerManager will start (GPUs over GPUs per
    replica); a ConfigError when none would (verl would start none and fail every sample)."""
    rollout = config.actor_rollout_ref.rollout
    gpus = int(rollout.n_gpus_per_node) * int(rollout.nnodes)
    tp, dp, pp = replica_sizes(rollout).values()
    if gpus // (tp * dp * pp) < 1:
        raise ConfigError(
            f"actor_rollout_ref.rollout: one server replica needs tensor_model_parallel_size {tp} x "
            f"data_parallel_size {dp} x pipeline_model_parallel_size {pp} = {tp * dp * pp} GPUs, but "
            f"n_gpus_per_node {rollout.n_gpus_per_node} x nnodes {rollout.nnodes} = {gpus}; no server would start. "
            f"Lower these sizes so that their product is at most {gpus} (on one GPU: all 1), or run on {tp * dp * pp} GPUs"
        )
    return gpus // (tp * dp * pp)


def make_backend(name: str, config: DictConfig, demo_policy: Any = None) -> Backend:
    """Build the named backend; the hf one loads ``actor_rollout_ref.model.path`` with transformers, the demo one
    plays ``demo_policy`` (a function of the decoded prompt, ``demo_server.load_policy``)."""
    if name == "demo":
        from extensions.backends.demo_server import DemoServer

        if demo_policy is None:
            raise ConfigError(
                "--backend demo needs a demonstrator: demo_policy (demo_server.load_policy('module:function'))"
            )

        backend = InProcessBackend(config, llm_client=None)
        backend.llm_client = backend.worker.llm_client = DemoServer(backend.tokenizer, demo_policy)
        return backend
    if name == "hf":
        from extensions.backends.hf_server import HFServer

        rollout = config.actor_rollout_ref.rollout
        server = HFServer.from_pretrained(
            config.actor_rollout_ref.model.path,
            response_length=int(rollout.response_length),
            max_model_len=int(rollout.prompt_length) + int(rollout.response_length),
        )
        backend = InProcessBackend(config, server)
        server.tokenizer = backend.tokenizer  # stop strings (the code-fence format) are matched on text
        return backend
    if name in ("vllm", "sglang"):
        return ServerBackend(config, name)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
