"""``trainer.v1.whole_batch_update`` (extensions/verl_compat/whole_batch.py): the setting and its checks before any
model loads, verl's real ``_balance_batch`` padding a folding batch only to the data-parallel ranks, and verl's real
``_update_actor`` handing the actor the whole batch as one mini-batch."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from omegaconf import OmegaConf, open_dict

from extensions.config_check import check_composed
from extensions.verl_compat import whole_batch_update
from tests.test_experiment_configs_validate import composed

BAD = "trainer.v1.whole_batch_update: {!r} is not valid; valid: true or false (default false)"
CRITIC = (
    "trainer.v1.whole_batch_update: true is not valid in a run that trains a critic (critic.enable, or "
    "adv_estimator=gae): the critic trains on verl's mini-batches, which need verl's padding; valid: false"
)


FIXED = (
    "trainer.v1.whole_batch_update: true is not valid with fixed micro-batches ({}): a GPU's rows then follow the "
    "trajectories and need not divide into micro-batches; valid: those keys true (micro-batches by tokens, "
    "ppo_max_token_len_per_gpu), or false"
)


def config(value: Any, estimator: str = "grpo", **models: Any) -> Any:
    """A trainer config; ``models`` overrides ``actor_rollout_ref`` (the actor's micro-batches by tokens unless
    given)."""
    return OmegaConf.create(
        {
            "trainer": {"v1": {"whole_batch_update": value}},
            "algorithm": {"adv_estimator": estimator},
            "critic": {},
            "actor_rollout_ref": models or {"actor": {"use_dynamic_bsz": True}},
        }
    )


@pytest.mark.parametrize(("value", "on"), [(None, False), (False, False), (True, True)])
def test_the_setting(value: Any, on: bool) -> None:
    assert whole_batch_update(config(value)) is on
    assert whole_batch_update(OmegaConf.create({"trainer": {}})) is False


@pytest.mark.parametrize("value", ["yes", 1, 0.5])
def test_a_bad_value_names_the_key_and_what_is_valid(value: Any) -> None:
    with pytest.raises(ValueError) as err:
        whole_batch_update(config(value))
    assert str(err.value) == BAD.format(value)


def test_it_is_refused_with_a_critic() -> None:
    with pytest.raises(ValueError) as err:
        whole_batch_update(config(True, estimator="gae"))
    assert str(err.value) == CRITIC
    assert whole_batch_update(config(False, estimator="gae")) is False


@pytest.mark.parametrize(
    ("models", "fixed"),
    [
        (
            {"actor": {}},
            "actor_rollout_ref.actor.use_dynamic_bsz=false, "
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false, actor_rollout_ref.ref.log_prob_use_dynamic_bsz=false",
        ),
        (
            {"actor": {"use_dynamic_bsz": True}, "rollout": {"log_prob_use_dynamic_bsz": False}},
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false",
        ),
    ],
)
def test_it_is_refused_with_fixed_micro_batches(models: dict, fixed: str) -> None:
    with pytest.raises(ValueError) as err:
        whole_batch_update(config(True, **models))
    assert str(err.value) == FIXED.format(fixed)
    assert whole_batch_update(config(False, **models)) is False


def test_config_check_reports_it_before_any_model_loads() -> None:
    cfg = composed("ledger_folding", "+trainer.v1.whole_batch_update=maybe")
    assert check_composed(cfg, "ledger_folding") == [f"ledger_folding: {BAD.format('maybe')}"]
    assert check_composed(composed("ledger_folding", "+trainer.v1.whole_batch_update=true"), "x") == []
    fixed = composed(
        "ledger_folding", "+trainer.v1.whole_batch_update=true", "actor_rollout_ref.actor.use_dynamic_bsz=false"
    )
    keys = (  # the log-prob keys follow the actor's (verl's interpolation)
        "actor_rollout_ref.actor.use_dynamic_bsz=false, actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false, "
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=false"
    )
    assert check_composed(fixed, "ledger_folding") == [f"ledger_folding: {FIXED.format(keys)}"]


def trainer_of(qwen_dir: Any, gpus: int, whole: bool) -> Any:
    """verl's v1 sync trainer on the driver (16 prompts x 8, ``ppo_mini_batch_size`` 4: 32 rows a mini-batch)."""
    from benchmarks.v1_padding import trainer

    step = trainer(qwen_dir, 16, gpus, 4)
    with open_dict(step.config):
        step.config.trainer.v1.whole_batch_update = whole
        step.config.actor_rollout_ref.actor.use_dynamic_bsz = True
    return step


def padded(tq: Any, step: Any, partition: str) -> tuple[int, list[int]]:
    """18 folding rows (16 trajectories, two folded once) through verl's real ``_balance_batch``: the rows after it,
    and each padding row's tokens."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from benchmarks.v1_padding import folding_rows

    keys, fields, tags = folding_rows(16)
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
    batch = step._balance_batch(tq.KVBatchMeta(partition_id=partition, keys=keys, tags=tags), metrics={})
    tq.kv_clear(keys=batch.keys, partition_id=partition)
    return len(batch.keys), [tag["seq_len"] for tag in batch.tags if tag.get("is_padding")]


@pytest.mark.parametrize(
    ("gpus", "whole", "rows", "padding"),
    [
        (1, True, 18, []),  # one rank: nothing to pad
        (4, True, 20, [2, 2]),  # to a multiple of 4 ranks, with the pack's 2-token rows
        (4, False, 32, [2] * 14),  # verl's multiple: 4 x 8 rows a mini-batch
    ],
)
def test_the_batch_is_padded_only_to_the_ranks(transfer_queue, qwen_dir, gpus, whole, rows, padding) -> None:
    step = trainer_of(qwen_dir, gpus, whole)
    assert padded(transfer_queue, step, f"whole_{gpus}_{whole}") == (rows, padding)


class RecordingActor:
    """The actor worker group's ``update_actor`` as ``_update_actor`` calls it: records the batch's ``extra_info``
    and answers with the metrics shape the workers return."""

    def __init__(self, ranks: int) -> None:
        self._dispatch_info = {"actor": list(range(ranks))}
        self.seen: dict[str, Any] = {}

    def update_actor(self, batch: Any) -> dict[str, Any]:
        self.seen = dict(batch.extra_info)
        return {"metrics": {"mfu": [0.5], "pg_loss": [0.25]}}


@pytest.mark.parametrize(("whole", "mini_batch"), [(True, 20), (False, 32)])
def test_the_actor_takes_the_whole_batch_as_one_mini_batch(qwen_dir, caplog, whole: bool, mini_batch: int) -> None:
    import transfer_queue as tq

    from extensions.verl_compat.trainer_hooks import actor_optimizer_steps

    step = trainer_of(qwen_dir, 4, whole)
    actor = step.actor_rollout_wg = RecordingActor(4)
    tags = [{"is_padding": i >= 18} for i in range(20 if whole else 32)]
    keys = [f"u{i // 2}_0_{i % 2}" if i < 18 else f"pad_{i}_0" for i in range(len(tags))]
    batch = tq.KVBatchMeta(partition_id="train", keys=keys, tags=tags)
    metrics: dict[str, Any] = {}
    step._update_actor(batch, metrics)
    assert (actor.seen["mini_batch_size"], actor.seen["global_batch_size"]) == (mini_batch, mini_batch)
    assert actor.seen["epochs"] == 1 and metrics["actor/pg_loss"] == 0.25
    assert step.actor_rollout_wg is actor  # the stand-in is gone after the call
    with caplog.at_level(logging.WARNING):
        counted = actor_optimizer_steps(step, batch)
    assert counted == {"longflow/actor_optimizer_steps": 1.0, "longflow/batch/padding_rows": float(len(tags) - 18)}
    assert "optimizer steps this training step" not in caplog.text
    if whole:  # separate_async updates the actor once per parameter_sync_step sub-batch, each taken whole
        step.parameter_sync_step = 2
        with open_dict(step.config):
            step.config.actor_rollout_ref.actor.ppo_epochs = 3
        assert actor_optimizer_steps(step, batch)["longflow/actor_optimizer_steps"] == 6.0


def test_the_actor_group_is_put_back_when_the_update_fails(qwen_dir) -> None:
    import transfer_queue as tq

    class Failing(RecordingActor):
        def update_actor(self, batch: Any) -> dict[str, Any]:
            raise RuntimeError("the worker died")

    step = trainer_of(qwen_dir, 2, True)
    actor = step.actor_rollout_wg = Failing(2)
    with pytest.raises(RuntimeError, match="the worker died"):
        step._update_actor(tq.KVBatchMeta(partition_id="train", keys=["a_0_0", "b_0_0"], tags=[{}, {}]), {})
    assert step.actor_rollout_wg is actor


def test_the_reliance_fails_when_verl_sets_the_mini_batch_after_calling_the_actor(monkeypatch) -> None:
    from verl.trainer.ppo.v1 import trainer_base

    from extensions.verl_compat import broken_reliances

    def _update_actor(self, batch, metrics):  # what a release that moved the mini-batch elsewhere looks like
        self.actor_rollout_wg.update_actor(batch)
        extra_info = {"mini_batch_size": ppo_mini_batch_size}  # noqa: F821
        batch.extra_info.update(extra_info)

    monkeypatch.setattr(trainer_base.PPOTrainer, "_update_actor", _update_actor)
    assert broken_reliances() == [
        "v1 whole-batch actor update (trainer/ppo/v1/trainer_base.py): AssertionError: _update_actor calls the actor "
        "before setting the mini-batch",
        "v1 trainer hooks (trainer/ppo/v1/trainer_base.py): AssertionError: _update_actor no longer takes a "
        "mini-batch of ppo_mini_batch_size x rollout.n rows",
    ]
