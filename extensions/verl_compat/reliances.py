"""What the seam takes from verl, one ``Reliance`` each, walked by ``tests/test_verl_compat.py``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import verl

from extensions.verl_compat.registries import (
    SYNTHETIC_SYSTEM,
    agent_loop_registry,
    rollout_replica_registry,
    tool_parser_registry,
)


@dataclass(frozen=True)
class Reliance:
    """One thing the pack takes from verl that verl does not promise to keep."""

    name: str
    mirrors: str
    """The verl file (inside the installed ``verl`` package) that defines it."""
    reason: str
    check: Callable[[], None]
    """Raises (AssertionError, AttributeError, ImportError, ...) when the reliance no longer holds."""


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _source_calls(fn: Any, *names: str) -> None:
    source = inspect.getsource(fn)
    missing = [name for name in names if f"{name}(" not in source]
    assert not missing, f"{fn.__qualname__} no longer calls {missing}"


def _check_registries() -> None:
    assert isinstance(agent_loop_registry(), dict), "agent_loop._agent_loop_registry is not a dict"
    from verl.experimental.agent_loop.tool_parser import ToolParser

    assert isinstance(tool_parser_registry(), dict), "ToolParser._registry is not a dict"
    assert _params(ToolParser.get_tool_parser)[:2] == ["name", "tokenizer"], "ToolParser.get_tool_parser changed"


def _check_engines_and_metrics() -> None:
    from verl.experimental.agent_loop import AgentLoopManager

    assert {"vllm", "sglang"} <= set(rollout_replica_registry()), "RolloutReplicaRegistry._registry changed"
    params = _params(AgentLoopManager._performance_metrics)
    assert params == ["self", "metrics", "output"], f"AgentLoopManager._performance_metrics changed: {params}"


def _check_tool_name_resolution() -> None:
    from verl.utils.tokenizer import continuous_token as ct

    params = _params(ct._resolve_required_tool_name)
    assert len(params) == 4, f"_resolve_required_tool_name changed: {params}"


def _check_no_interactions_package() -> None:
    from pathlib import Path

    assert not (Path(verl.__file__).parent / "interactions").exists(), "verl ships verl.interactions again"


def _check_tool_loader() -> None:
    from verl.tools import tool_registry

    _source_calls(tool_registry.load_all_tools, "initialize_tools_from_config")
    assert _params(tool_registry.initialize_tools_from_config)[:1] == ["tools_config_file"], "loader changed"


def _check_continuous_token() -> None:
    from verl.utils.tokenizer import continuous_token as ct

    assert ct._SYNTHETIC_SYSTEM_MESSAGE["content"] == SYNTHETIC_SYSTEM, "synthetic system text changed"
    render = _params(ct.ContinuousTokenBuilder.render_delta_token_id)
    assert render == ["self", "prefix_messages", "appended_messages", "add_generation_prompt", "tools"], render
    assert _params(ct.ContinuousTokenBuilder._render_tokens)[:2] == ["self", "messages"], "_render_tokens changed"


def _check_tool_agent_loop() -> None:
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop

    expected = {
        "_handle_pending_state": ["self", "agent_data", "sampling_params"],
        "_handle_generating_state": ["self", "agent_data", "sampling_params", "ignore_termination"],
        "_handle_processing_tools_state": ["self", "agent_data"],
        "_build_assistant_message": ["self", "content", "agent_data"],
        "ct_merge_assistant_token": [
            "self",
            "runtime_token_ids",
            "assistant_token_ids",
            "response_mask",
            "response_logprobs",
            "assistant_logprobs",
        ],  # fmt: skip
        "ct_merge_context_msg": [
            "self",
            "previous_messages",
            "updated_messages",
            "runtime_token_ids",
            "response_mask",
            "response_logprobs",
            "tools",
        ],  # fmt: skip
    }
    for name, params in expected.items():
        assert _params(getattr(ToolAgentLoop, name)) == params, f"ToolAgentLoop.{name} signature changed"
    # built with the keywords extensions.episode.Episode passes, so a renamed parameter shows here
    data = AgentData(
        messages=[],
        image_data=None,
        video_data=None,
        audio_data=None,
        mm_processor_kwargs=None,
        metrics={},
        request_id="r",
        tools_kwargs={},
    )
    fields = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "turn_scores", "tool_rewards")
    more = ("user_turns", "assistant_turns", "tool_calls", "extra_fields", "messages", "request_id", "metrics")
    missing = [f for f in (*fields, *more) if not hasattr(data, f)]
    assert not missing, f"AgentData lost {missing}"


def _check_output_columns() -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, AgentLoopWorker

    assert {"extra_fields", "reward_score", "metrics"} <= set(AgentLoopOutput.model_fields), "AgentLoopOutput changed"
    source = inspect.getsource(AgentLoopWorker._postprocess)
    missing = [key for key in ("turn_scores", "tool_rewards", "extras") if f'"{key}"' not in source]
    assert not missing, f"AgentLoopWorker._postprocess no longer keeps {missing} as stable columns"


def _check_legacy_postprocess() -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    params = _params(AgentLoopWorker._agent_loop_postprocess)
    assert params == ["self", "output", "validate", "kwargs"], f"legacy postprocess changed: {params}"
    _source_calls(AgentLoopWorker._run_agent_loop, "_agent_loop_postprocess")
    from verl.experimental.agent_loop import AgentLoopManager

    source = inspect.getsource(AgentLoopManager.__init__)  # a subclass's workers class is kept
    assert 'if not hasattr(self, "agent_loop_workers_class")' in source, "AgentLoopManager's workers class hook changed"


def _check_v1_postprocess() -> None:
    from verl.trainer.ppo.v1 import agent_loop_tq

    cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_metadata__.modified_class
    params = [p for p in _params(cls._agent_loop_postprocess) if p != "_ray_trace_ctx"]  # added by ray.remote
    assert params == ["self", "output", "validate", "kwargs"], f"v1 postprocess changed: {params}"
    _source_calls(cls._agent_loop_postprocess, "as_dict", "async_kv_batch_put")


def _check_estimator_call() -> None:
    from verl.trainer.ppo import core_algos, ray_trainer

    assert callable(core_algos.register_adv_est) and callable(core_algos.get_adv_estimator_fn)
    source = inspect.getsource(ray_trainer.compute_advantage)
    for key in ("token_level_rewards", "response_mask", "config", "index"):
        assert f'"{key}"' in source, f"compute_advantage no longer passes {key} to estimators"


def _check_legacy_hooks() -> None:
    from verl.trainer.ppo import ray_trainer

    _source_calls(ray_trainer.RayPPOTrainer.fit, "compute_advantage", "compute_data_metrics")
    assert _params(ray_trainer.RayPPOTrainer._val_metrics_update)[3] == "reward_extra_infos_dict"


def _check_replay_poll() -> None:
    from verl.trainer.ppo.v1 import replay_buffer, trainer_base

    assert _params(trainer_base.PPOTrainer._build_replay_buffer) == ["self"], "_build_replay_buffer changed"
    for cls in (replay_buffer.ReplayBuffer, replay_buffer.ReplayBufferAsync):
        assert "poll_interval" in _params(cls.__init__), f"{cls.__name__} no longer takes poll_interval"
        assert _params(cls.sample)[:4] == ["self", "global_steps", "partition_id", "batch_size"], "sample changed"
    assert "time.sleep(self.poll_interval)" in inspect.getsource(replay_buffer.ReplayBuffer._wait_for_next_poll), (
        "ReplayBuffer._wait_for_next_poll no longer sleeps self.poll_interval"
    )
    _source_calls(trainer_base.PPOTrainer._step_once, "self.replay_buffer.sample")
    init = inspect.getsource(trainer_base.PPOTrainer.__init__)  # the config check runs there, before any model
    assert "self._build_replay_buffer()" in init and "self.init()" not in init, (
        "PPOTrainer.__init__ no longer builds the replay buffer before the workers"
    )


def _check_padding_rows() -> None:
    from verl.trainer.ppo import padding_utils
    from verl.trainer.ppo.v1 import trainer_base

    assert padding_utils.SYNTHETIC_PADDING_SEQ_LEN == 128, "SYNTHETIC_PADDING_SEQ_LEN is no longer 128"
    template = inspect.getsource(padding_utils.construct_minimal_padding_template)
    assert "(SYNTHETIC_PADDING_SEQ_LEN - 1,)" in template, "the padding row no longer reads SYNTHETIC_PADDING_SEQ_LEN"
    _source_calls(padding_utils.upsample_batch_to_divisible_size, "construct_minimal_padding_template")
    _source_calls(trainer_base.PPOTrainer._balance_batch, "upsample_batch_to_divisible_size")
    assert _params(trainer_base.PPOTrainer._balance_batch)[:2] == ["self", "batch"], "_balance_batch changed"


def _check_whole_batch() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    trainer = trainer_base.PPOTrainer
    assert _params(trainer._get_required_batch_multiple)[:2] == ["self", "dp_size"], (
        "_get_required_batch_multiple changed"
    )
    _source_calls(trainer._balance_batch, "self._get_required_batch_multiple")
    update = inspect.getsource(trainer._update_actor)
    for text in ('"mini_batch_size": ppo_mini_batch_size', "batch.extra_info.update(extra_info)"):
        assert text in update, f"_update_actor no longer has {text!r}"
    _source_calls(trainer._update_actor, "self.actor_rollout_wg.update_actor")
    assert update.index("batch.extra_info.update(extra_info)") < update.index("self.actor_rollout_wg.update_actor("), (
        "_update_actor calls the actor before setting the mini-batch"
    )


def _verl_source(relative: str) -> str:
    """A verl file's text, read without importing it (the vLLM modules import vLLM, absent on CPU)."""
    from pathlib import Path

    return (Path(verl.__file__).parent / relative).read_text()


def _check_weight_ipc() -> None:
    rollout = "workers/rollout/vllm_rollout/"
    sender = _verl_source(rollout + "vllm_rollout.py")
    assert "class ServerAdapter(" in sender, "vllm_rollout.ServerAdapter is gone"
    assert "job_id = ray.get_runtime_context().get_job_id()" in sender, "ServerAdapter no longer reads Ray's job id"
    assert 'self.zmq_handle = f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-' in sender, "the sender's socket changed"
    server = _verl_source(rollout + "vllm_async_server.py")
    assert "class vLLMHttpServer:" in server, "vllm_async_server.vLLMHttpServer is gone"
    assert 'os.environ["VERL_RAY_JOB_ID"] = ray.get_runtime_context().get_job_id()' in server, (
        "vLLMHttpServer.__init__ no longer passes the job id to its vLLM workers"
    )
    receiver = _verl_source(rollout + "utils.py")
    assert 'job_id = os.environ.get("VERL_RAY_JOB_ID", "0")' in receiver, "the receiver no longer reads VERL_RAY_JOB_ID"
    assert (
        'return f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{replica_rank}-rank-{trainer_rank}.sock"' in receiver
    ), "the receiver's socket changed"


def _check_v1_hooks() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    trainer = trainer_base.PPOTrainer
    assert _params(trainer._compute_advantage) == ["self", "batch", "metrics"], "_compute_advantage changed"
    _source_calls(trainer._compute_advantage, "compute_advantage_for_multi_trajectories")
    assert "config=self.config.algorithm" in inspect.getsource(trainer._compute_advantage), (
        "_compute_advantage no longer passes config= to compute_advantage_for_multi_trajectories"
    )
    params = _params(trainer_base.compute_advantage_for_multi_trajectories)
    assert params[:3] == ["data", "batch_keys", "adv_estimator"], "compute_advantage_for_multi_trajectories changed"
    assert _params(trainer._compute_metrics)[:3] == ["self", "batch", "metrics"], "_compute_metrics changed"
    assert _params(trainer._val_metrics_update)[3] == "reward_extra_infos_dict"
    _source_calls(trainer._step_once, "_compute_advantage")
    _source_calls(trainer.fit, "_compute_metrics")
    update = inspect.getsource(trainer._update_actor)  # longflow/actor_optimizer_steps counts its mini-batches
    assert "ppo_mini_batch_size * self.config.actor_rollout_ref.rollout.n" in update, (
        "_update_actor no longer takes a mini-batch of ppo_mini_batch_size x rollout.n rows"
    )


RELIANCES: list[Reliance] = [
    Reliance(
        "registries",
        "experimental/agent_loop/agent_loop.py, experimental/agent_loop/tool_parser.py",
        "the plugin registers long_workflow and the pack's parsers by name",
        _check_registries,
    ),
    Reliance(
        "engine registry and rollout metrics",
        "workers/rollout/replica.py, experimental/agent_loop/agent_loop.py",
        "the driver's --backend vllm/sglang names verl's engines; the GPU throughput script keeps per-trajectory metrics",
        _check_engines_and_metrics,
    ),
    Reliance(
        "tool message names",
        "utils/tokenizer/continuous_token.py",
        "the parsers' call ids must let verl's Continuous Token builder name each tool message (tests)",
        _check_tool_name_resolution,
    ),
    Reliance(
        "interactions alias",
        "interactions/base.py (verl <= 0.7; removed upstream in PR #6074)",
        "verl 0.7 interaction classes import verl.interactions.base, which the pack provides",
        _check_no_interactions_package,
    ),
    Reliance(
        "tool loader",
        "tools/tool_registry.py",
        "verl <= 0.8 MCP tool YAML is expanded before verl's loader reads it",
        _check_tool_loader,
    ),
    Reliance(
        "continuous token prefix cache",
        "utils/tokenizer/continuous_token.py",
        "cache_prefix_renders wraps render_delta_token_id and calls _render_tokens",
        _check_continuous_token,
    ),
    Reliance(
        "ToolAgentLoop handlers and AgentData",
        "experimental/agent_loop/tool_agent_loop.py, experimental/agent_loop/agent_loop.py",
        "LongWorkflowAgent overrides the state handlers and merges tokens with ct_merge_*",
        _check_tool_agent_loop,
    ),
    Reliance(
        "stable output columns",
        "experimental/agent_loop/agent_loop.py",
        "extras, turn_scores and tool_rewards must be columns of every batch",
        _check_output_columns,
    ),
    Reliance(
        "legacy postprocessing of a list",
        "experimental/agent_loop/agent_loop.py",
        "the rollout driver's workers (in-process, and Ray actors through AgentLoopManager's "
        "agent_loop_workers_class) take a folding loop's segments (verl_compat/worker_hooks.py)",
        _check_legacy_postprocess,
    ),
    Reliance(
        "v1 postprocessing",
        "trainer/ppo/v1/agent_loop_tq.py",
        "v1 stores each AgentLoopOutput.as_dict() (extra_fields included) in TransferQueue",
        _check_v1_postprocess,
    ),
    Reliance(
        "estimator call",
        "trainer/ppo/ray_trainer.py, trainer/ppo/core_algos.py",
        "registered estimators get token_level_rewards, response_mask, index and config",
        _check_estimator_call,
    ),
    Reliance(
        "legacy trainer hooks",
        "trainer/ppo/ray_trainer.py",
        "per-row records for estimators and longflow/ metrics",
        _check_legacy_hooks,
    ),
    Reliance(
        "v1 replay buffer poll",
        "trainer/ppo/v1/trainer_base.py, trainer/ppo/v1/replay_buffer.py",
        "poll_interval_s replaces the buffer's fixed 2 s poll; sample() is timed for longflow/rollout/ metrics",
        _check_replay_poll,
    ),
    Reliance(
        "v1 padding rows",
        "trainer/ppo/padding_utils.py, trainer/ppo/v1/trainer_base.py",
        "_balance_batch pads with rows of SYNTHETIC_PADDING_SEQ_LEN tokens, read when each row is built",
        _check_padding_rows,
    ),
    Reliance(
        "v1 whole-batch actor update",
        "trainer/ppo/v1/trainer_base.py",
        "_balance_batch pads to _get_required_batch_multiple(dp_size); _update_actor sets the mini-batch in the "
        "batch's extra_info, then calls actor_rollout_wg.update_actor",
        _check_whole_batch,
    ),
    Reliance(
        "weight-sync socket",
        "workers/rollout/vllm_rollout/vllm_rollout.py, vllm_async_server.py, utils.py",
        "both ends of the colocated weight sync take the job id that weight_ipc scopes per Ray node",
        _check_weight_ipc,
    ),
    Reliance(
        "v1 trainer hooks",
        "trainer/ppo/v1/trainer_base.py",
        "per-row records for estimators, segment weights after the advantage step, longflow/ metrics",
        _check_v1_hooks,
    ),
]


def broken_reliances() -> list[str]:
    """One line per reliance that no longer holds against the installed verl."""
    problems = []
    for reliance in RELIANCES:
        try:
            reliance.check()
        except Exception as exc:
            problems.append(f"{reliance.name} ({reliance.mirrors}): {type(exc).__name__}: {exc}")
    return problems
