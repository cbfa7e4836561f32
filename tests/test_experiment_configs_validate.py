"""Every experiment's config, as ``main_ppo`` composes it, passes the pack's check and verl's ``validate_config``
(what ``main_ppo`` runs before any worker starts), and so do the overrides the GPU scripts add."""

from __future__ import annotations

import pytest
from verl.utils.config import validate_config

from extensions.config_check import check_composed
from tests.conftest import EXPERIMENTS, compose_experiment

LEDGER_HOLD = [  # scripts/gpu/ledger_hold.sh
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
]


composed = compose_experiment


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_validates_on_one_gpu(experiment: str) -> None:
    cfg = composed(experiment)
    assert check_composed(cfg, experiment) == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_the_ledger_hold_validates() -> None:
    cfg = composed("ledger_folding", *LEDGER_HOLD)
    assert check_composed(cfg, "ledger_folding") == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_a_rollout_that_needs_more_gpus_than_the_trainer_has_is_a_config_problem() -> None:
    # verl's own validate_config passes it; no vLLM server would start (the ledger experiment did this)
    cfg = composed("ledger_folding", "actor_rollout_ref.rollout.tensor_model_parallel_size=2")
    validate_config(cfg, use_reference_policy=False, use_critic=False)
    assert check_composed(cfg, "ledger_folding") == [
        "ledger_folding: one rollout replica needs actor_rollout_ref.rollout.tensor_model_parallel_size=2 x "
        "actor_rollout_ref.rollout.data_parallel_size=1 x actor_rollout_ref.rollout.pipeline_model_parallel_size=1 "
        "= 2 GPUs, which does not divide trainer.n_gpus_per_node x trainer.nnodes = 1; "
        "set actor_rollout_ref.rollout.tensor_model_parallel_size=1 on one GPU"
    ]
