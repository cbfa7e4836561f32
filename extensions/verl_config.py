"""Compose verl's own ``ppo_trainer`` config and build verl's real AgentLoopWorker in-process.

Used by the rollout driver, the CPU tests and the benchmarks: no Ray, no GPU. The LLM
client is anything with verl's ``generate`` coroutine (a real server client, the
embedded transformers backend, or a scripted fake in tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import verl
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

VERL_CONFIG_DIR = Path(verl.__file__).parent / "trainer" / "config"


def compose_verl_config(overrides: list[str], config_name: str = "ppo_trainer") -> DictConfig:
    """verl's trainer config with Hydra ``overrides`` applied (rollout.name defaults to vllm)."""
    if not any(o.startswith("actor_rollout_ref.rollout.name=") for o in overrides):
        overrides = [*overrides, "actor_rollout_ref.rollout.name=vllm"]
    with initialize_config_dir(config_dir=str(VERL_CONFIG_DIR), version_base=None):
        return compose(config_name, overrides=overrides)


def build_agent_loop_worker(config: DictConfig, llm_client: Any) -> Any:
    """verl's AgentLoopWorker, constructed in this process (not as a Ray actor)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    return AgentLoopWorker(config, llm_client=llm_client)
