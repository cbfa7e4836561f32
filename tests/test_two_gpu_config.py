"""The two-GPU run's config (scripts/gpu/two_gpu_learn.sh) passes verl's own checks on CPU: the
learning experiment with ``trainer.n_gpus_per_node=2`` composes, the pack's config check accepts it,
and verl's ``validate_config`` (what ``main_ppo`` runs before any worker starts) does too."""

from __future__ import annotations

import pytest
from verl.utils.config import validate_config

from extensions.config_check import check_composed
from tests.conftest import compose_experiment


def composed(*overrides: str):
    return compose_experiment("gsm8k_learn", *overrides)


@pytest.mark.parametrize("gpus", [1, 2])
def test_the_learning_run_validates_on_one_and_two_gpus(gpus: int) -> None:
    cfg = composed(f"trainer.n_gpus_per_node={gpus}", "algorithm.adv_estimator=turn_grpo")
    assert check_composed(cfg, "gsm8k_learn") == []
    validate_config(cfg, use_reference_policy=False, use_critic=False)


def test_the_check_is_live_a_gpu_count_that_does_not_divide_the_batch_fails() -> None:
    # with fixed-size micro-batches verl checks 16 prompts x 8 samples against the GPU count
    cfg = composed(
        "trainer.n_gpus_per_node=3",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    )
    with pytest.raises((AssertionError, ValueError), match="divisible"):
        validate_config(cfg, use_reference_policy=False, use_critic=False)
