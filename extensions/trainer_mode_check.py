"""Checks of verl's v1 trainer modes, the replay buffer's poll and the padding rows, before any model loads.

verl 0.9.1 checks ``separate_async`` with bare ``assert`` s inside the trainer's constructor (after Ray and
the dataset are up), and the pack's ``poll_interval_s`` would otherwise fail only when the replay buffer is
built. ``config_check`` runs these on the composed config and lists every problem at once. A run started straight
from ``main_ppo`` gets the rest from ``raise_trainer_problems`` in the trainer's constructor, before any model
loads: the poll, the padding rows and ``hybrid_engine`` (verl's own ``separate_async`` asserts come first there).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from extensions.errors import choices
from extensions.verl_compat import padding_row_tokens, poll_interval, whole_batch_update

TRAINER_MODES = ("sync", "colocate_async", "separate_async")
TRAINER_WHERE = "the trainer's config"
"""How ``raise_trainer_problems`` names the config it checks."""


def check_trainer_mode(cfg: Any, where: str, *, any_mode: bool = False) -> list[str]:
    """Problems of ``trainer.v1.trainer_mode`` and its block, of ``sampler_kwargs.poll_interval_s`` and of
    ``trainer.v1.padding_row_tokens`` and ``trainer.v1.whole_batch_update``. ``any_mode``: a mode the pack does not know is no problem (in the trainer,
    verl has already found its class: a user's ``register_trainer``)."""
    problems = []
    for check in (poll_interval, padding_row_tokens, whole_batch_update):
        try:
            check(cfg)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    v1 = (cfg.get("trainer") or {}).get("v1") or {}
    mode = v1.get("trainer_mode", "sync")
    if mode not in TRAINER_MODES:
        if any_mode:
            return problems
        return [
            *problems,
            f"{where}: trainer.v1.trainer_mode={mode!r} is not a v1 mode; valid: {choices(TRAINER_MODES)}",
        ]
    if mode == "separate_async":
        problems += _separate_async_problems(cfg, v1, where)
    return problems


def verl_logs_info() -> bool:
    """Whether verl's trainer modules log at INFO: each sets its logger's level from ``VERL_LOGGING_LEVEL`` (default
    INFO) when imported; the same setting on a probe logger answers without importing them."""
    probe = logging.Logger("verl_logging_level_probe")
    probe.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))
    return probe.isEnabledFor(logging.INFO)


def raise_trainer_problems(cfg: Any) -> None:
    """``check_trainer_mode`` inside verl's trainer (its ``__init__``, before any worker or model): a ``ValueError``
    listing every problem, one a line, for a run started without ``config_check``."""
    problems = check_trainer_mode(cfg, TRAINER_WHERE, any_mode=True)
    if problems:
        raise ValueError("\n".join(problems))


def _separate_async_problems(cfg: Any, v1: Any, where: str) -> list[str]:
    problems = []
    sync_step = int(v1.separate_async.parameter_sync_step)
    mini, batch = int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size), int(cfg.data.train_batch_size)
    if batch != sync_step * mini:
        problems.append(
            f"{where}: separate_async trains data.train_batch_size={batch} prompts a step, which must equal "
            f"trainer.v1.separate_async.parameter_sync_step={sync_step} x actor_rollout_ref.actor.ppo_mini_batch_size="
            f"{mini} = {sync_step * mini}"
        )
    rollout = cfg.actor_rollout_ref.rollout
    if int(rollout.get("nnodes") or 0) < 1 or int(rollout.get("n_gpus_per_node") or 0) < 1:
        problems.append(
            f"{where}: separate_async needs GPUs of its own for rollout: set actor_rollout_ref.rollout.nnodes >= 1 "
            f"and actor_rollout_ref.rollout.n_gpus_per_node >= 1 (got {rollout.get('nnodes')} and "
            f"{rollout.get('n_gpus_per_node')}); the trainer keeps trainer.n_gpus_per_node"
        )
    if cfg.actor_rollout_ref.get("hybrid_engine", True) is False and verl_logs_info():
        problems.append(
            f"{where}: actor_rollout_ref.hybrid_engine=false stops verl 0.9.1's separate_async trainer in its setup "
            "(at VERL_LOGGING_LEVEL=INFO, verl's default), after the rollout replicas start: trainer_separate_async.py "
            "passes flush=True to logger.info (TypeError: Logger._log() got an unexpected keyword argument 'flush'); "
            "leave actor_rollout_ref.hybrid_engine=true (VERL_LOGGING_LEVEL=WARN skips that call; not measured)"
        )
    backend = rollout.checkpoint_engine.backend
    if backend == "naive":
        problems.append(
            f"{where}: separate_async sends weights to the rollout GPUs: set "
            "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl (or nixl, mooncake); 'naive' only works colocated"
        )
    return problems
