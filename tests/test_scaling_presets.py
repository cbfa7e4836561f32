"""The GPU presets of experiments/gsm8k_learn and experiments/ledger_folding (``gpus/x1..x8``) and the shared v1
trainer modes (``extensions/presets/mode/``) pass the pack's config check and verl's ``validate_config`` on CPU,
gsm8k_learn's with the long-tail tools; the v1 mode checks (``extensions/trainer_mode_check.py``) name what is wrong
before any model loads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from verl.trainer.ppo.v1 import trainer_separate_async
from verl.utils.config import validate_config

from extensions.config_check import check_composed
from extensions.tools.latency import ToolLatency
from extensions.tools.python_exec import PythonExecTool
from extensions.trainer_mode_check import raise_trainer_problems
from tests.conftest import ROOT, compose_experiment

EXPERIMENT = ROOT / "experiments" / "gsm8k_learn"
LONG_TAIL = "actor_rollout_ref.rollout.multi_turn.tool_config_path=experiments/gsm8k_learn/tools_long_tail.yaml"


def composed(*overrides: str):
    return compose_experiment("gsm8k_learn", "algorithm.adv_estimator=turn_grpo", LONG_TAIL, *overrides)


# (experiment, mode, ppo_mini_batch_size a GPU): gsm8k_learn two actor updates a step; ledger_folding one AdamW step
# a training step (16 ledgers x 12 segments), which separate_async's batch rule does not fit (tested below)
PRESETS = [("gsm8k_learn", mode, 8) for mode in ("sync", "colocate_async", "separate_async")] + [
    ("ledger_folding", mode, 192) for mode in ("sync", "colocate_async")
]


@pytest.mark.parametrize(("experiment", "mode", "mini_batch"), PRESETS)
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_every_preset_validates(gpus: int, experiment: str, mode: str, mini_batch: int) -> None:
    presets = (f"+gpus=x{gpus}", f"+mode={mode}")
    cfg = composed(*presets) if experiment == "gsm8k_learn" else compose_experiment(experiment, *presets)
    assert (cfg.trainer.n_gpus_per_node, cfg.data.train_batch_size) == (gpus, 16 * gpus)
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == mini_batch * gpus
    assert cfg.actor_rollout_ref.rollout.agent.num_workers == 4 * gpus
    assert cfg.trainer.v1.trainer_mode == mode
    assert check_composed(cfg, experiment) == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_strong_scaling_keeps_one_gpus_batch() -> None:
    cfg = composed("+gpus=x4", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8")
    assert check_composed(cfg, "gsm8k_learn") == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_separate_async_problems_are_listed_at_once() -> None:
    cfg = composed(
        "+gpus=x1",
        "+mode=separate_async",
        "data.train_batch_size=24",
        "actor_rollout_ref.rollout.n_gpus_per_node=0",
        "actor_rollout_ref.rollout.checkpoint_engine.backend=naive",
    )
    assert check_composed(cfg, "gsm8k_learn") == [
        "gsm8k_learn: separate_async trains data.train_batch_size=24 prompts a step, which must equal "
        "trainer.v1.separate_async.parameter_sync_step=2 x actor_rollout_ref.actor.ppo_mini_batch_size=8 = 16",
        "gsm8k_learn: separate_async needs GPUs of its own for rollout: set actor_rollout_ref.rollout.nnodes >= 1 "
        "and actor_rollout_ref.rollout.n_gpus_per_node >= 1 (got 1 and 0); the trainer keeps trainer.n_gpus_per_node",
        "gsm8k_learn: separate_async sends weights to the rollout GPUs: set "
        "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl (or nixl, mooncake); 'naive' only works colocated",
    ]


def test_separate_async_without_the_hybrid_replica_is_refused_before_verl_fails() -> None:
    # verl 0.9.1 raises in trainer_separate_async.py's _setup (logger.info(..., flush=True)), ~4 min into a run
    source = (Path(trainer_separate_async.__file__)).read_text()
    assert "hybrid replicas disabled" in source and "flush=True," in source
    assert check_composed(composed("+gpus=x2", "+mode=separate_async"), "gsm8k_learn") == []
    cfg = composed("+gpus=x2", "+mode=separate_async", "actor_rollout_ref.hybrid_engine=false")
    assert check_composed(cfg, "gsm8k_learn") == [
        "gsm8k_learn: actor_rollout_ref.hybrid_engine=false stops verl 0.9.1's separate_async trainer in its setup "
        "(at VERL_LOGGING_LEVEL=INFO, verl's default), after the rollout replicas start: trainer_separate_async.py "
        "passes flush=True to logger.info (TypeError: Logger._log() got an unexpected keyword argument 'flush'); "
        "leave actor_rollout_ref.hybrid_engine=true (VERL_LOGGING_LEVEL=WARN skips that call; not measured)"
    ]
    assert trainer_separate_async.logger.isEnabledFor(logging.INFO)
    with pytest.raises(TypeError, match="unexpected keyword argument 'flush'"):
        trainer_separate_async.logger.info("the call verl makes", flush=True)


def test_at_verls_warn_level_the_call_is_skipped_and_the_setting_allowed(monkeypatch) -> None:
    logger, level = trainer_separate_async.logger, trainer_separate_async.logger.level
    logger.setLevel(logging.WARNING)  # what VERL_LOGGING_LEVEL=WARN gives at import (setLevel clears the cache)
    try:
        logger.info("the call verl makes", flush=True)  # returns before Logger._log: no TypeError
    finally:
        logger.setLevel(level)
    monkeypatch.setenv("VERL_LOGGING_LEVEL", "WARN")
    cfg = composed("+gpus=x2", "+mode=separate_async", "actor_rollout_ref.hybrid_engine=false")
    assert check_composed(cfg, "gsm8k_learn") == []


def test_in_the_trainer_a_mode_registered_with_verl_is_not_a_problem() -> None:
    cfg = composed("trainer.v1.trainer_mode=my_registered_mode")
    assert check_composed(cfg, "gsm8k_learn") == [
        "gsm8k_learn: trainer.v1.trainer_mode='my_registered_mode' is not a v1 mode; valid: 'colocate_async', "
        "'separate_async', 'sync'"
    ]
    raise_trainer_problems(cfg)  # verl found its class before the check runs: nothing to add
    with pytest.raises(ValueError, match="poll_interval_s: 0 is out of range"):
        raise_trainer_problems(
            composed("trainer.v1.trainer_mode=my_mode", "trainer.v1.sampler.sampler_kwargs.poll_interval_s=0")
        )


def test_an_unknown_mode_and_a_bad_poll_are_config_problems() -> None:
    cfg = composed("trainer.v1.trainer_mode=fully_async", "trainer.v1.sampler.sampler_kwargs.poll_interval_s=0")
    assert check_composed(cfg, "gsm8k_learn") == [
        "gsm8k_learn: trainer.v1.sampler.sampler_kwargs.poll_interval_s: 0 is out of range; valid: seconds between "
        "checks, in (0, 60]",
        "gsm8k_learn: trainer.v1.trainer_mode='fully_async' is not a v1 mode; valid: 'colocate_async', "
        "'separate_async', 'sync'",
    ]


def test_the_long_tail_tools_file_states_its_distribution() -> None:
    (entry,) = yaml.safe_load((EXPERIMENT / "tools_long_tail.yaml").read_text())["tools"]
    tool = PythonExecTool(dict(entry["config"]))
    assert tool.latency.settings == ToolLatency(distribution="lognormal", median_s=0.5, sigma=1.5, max_s=10.0, seed=0)
    assert tool.limits.wall_time_s + tool.latency.settings.max_s < 15.0  # the loop's tool_timeout_s


def test_folding_under_separate_async_names_its_batch_rule() -> None:
    cfg = compose_experiment("ledger_folding", "+gpus=x1", "+mode=separate_async")
    assert check_composed(cfg, "ledger_folding") == [
        "ledger_folding: separate_async trains data.train_batch_size=16 prompts a step, which must equal "
        "trainer.v1.separate_async.parameter_sync_step=2 x actor_rollout_ref.actor.ppo_mini_batch_size=192 = 384",
    ]


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_folding_under_separate_async_fits_with_the_whole_batch_update(gpus: int) -> None:
    """The recipe scripts/gpu/scale_hold.sh's fold_sep_x1_wb runs: one actor update a step (parameter_sync_step 1,
    the mini-batch the whole batch of prompts), taken whole, so one AdamW step a training step as in the sync and
    colocate_async presets, whatever rows the folded trajectories make."""
    batch = 16 * gpus
    cfg = compose_experiment(
        "ledger_folding",
        f"+gpus=x{gpus}",
        "+mode=separate_async",
        "+trainer.v1.whole_batch_update=true",
        "trainer.v1.separate_async.parameter_sync_step=1",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
    )
    assert cfg.data.train_batch_size == batch  # verl's own assert: parameter_sync_step x ppo_mini_batch_size
    assert (cfg.trainer.n_gpus_per_node, cfg.actor_rollout_ref.rollout.n_gpus_per_node) == (gpus, 1)
    assert check_composed(cfg, "ledger_folding") == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_the_gathered_fsdp_update_validates_and_reaches_the_engine_config() -> None:
    """scale_hold.sh's fold_sync_x2_wb_ns: verl's FSDP engine reads both settings from the actor's fsdp_config
    (FSDPEngine._gradient_sync_context, get_sharding_strategy), whose fsdp.yaml defaults are false and true."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import FSDPEngineConfig

    default = compose_experiment("ledger_folding", "+gpus=x2", "+mode=sync", "+trainer.v1.whole_batch_update=true")
    cfg = compose_experiment(
        "ledger_folding",
        "+gpus=x2",
        "+mode=sync",
        "+trainer.v1.whole_batch_update=true",
        "actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation=true",
        "actor_rollout_ref.actor.fsdp_config.reshard_after_forward=false",
    )
    assert check_composed(cfg, "ledger_folding") == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)
    settings = ("use_no_sync_for_gradient_accumulation", "reshard_after_forward")
    engines = [omega_conf_to_dataclass(c.actor_rollout_ref.actor.fsdp_config) for c in (default, cfg)]
    assert all(isinstance(engine, FSDPEngineConfig) for engine in engines)
    assert [tuple(getattr(engine, key) for key in settings) for engine in engines] == [(False, True), (True, False)]


@pytest.mark.parametrize(
    "experiment", ["gsm8k_ask_user", "gsm8k_code_verify", "gsm8k_learn", "long_workflow_15", "mcp_units_search"]
)
def test_every_experiment_takes_the_mode_presets(experiment: str) -> None:
    """The loops with tools and users (long_workflow, ask-user, MCP) run under colocate_async with a `+mode`."""
    cfg = compose_experiment(experiment, "+mode=colocate_async")
    assert cfg.trainer.v1.trainer_mode == "colocate_async"
    assert cfg.trainer.v1.colocate_async.num_warmup_batches == 1
    assert check_composed(cfg, experiment) == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)
