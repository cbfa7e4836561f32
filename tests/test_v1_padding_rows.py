"""verl v1's padding rows, 2 tokens on an FSDP actor (extensions/verl_compat/padding_rows.py): the setting, its
check before any model loads, and verl's real ``_balance_batch`` putting such rows into a real TransferQueue."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

from extensions.config_check import check_composed
from extensions.verl_compat import padding_row_tokens
from tests.test_experiment_configs_validate import composed

BAD = (
    "trainer.v1.padding_row_tokens: {!r} is not valid; valid: a whole number of tokens >= 2 (a padding row's prompt "
    "tokens and its one masked response token), or null for the default"
)


def config(strategy: str = "fsdp", tokens: Any = None, critic: str = "megatron", **critic_use: Any) -> Any:
    """A trainer config; the critic (Megatron unless named) is used per verl's need_critic: ``enable`` or GAE."""
    return OmegaConf.create(
        {
            "trainer": {"v1": {"padding_row_tokens": tokens}},
            "actor_rollout_ref": {"actor": {"strategy": strategy, "ulysses_sequence_parallel_size": 4}},
            "critic": {"strategy": critic, "enable": critic_use.get("enable")},
            "algorithm": {"adv_estimator": critic_use.get("estimator", "grpo")},
        }
    )


@pytest.mark.parametrize(
    ("cfg", "tokens"),
    [
        (config("fsdp"), 2),  # the Megatron critic is not used (GRPO); Ulysses pads whole sequences, not rows
        (config("fsdp2"), 2),
        (config("megatron"), None),  # verl's 128 stays: its packed context-parallel split needs them
        (config("fsdp", estimator="gae"), None),  # the critic trains on the padding rows too
        (config("fsdp", enable=True), None),
        (config("fsdp", critic="fsdp", estimator="gae"), 2),
        (config("fsdp", estimator="gae", enable=False), 2),
        (config("megatron", tokens=64), 64),
        (config("fsdp", tokens=128), 128),  # verl's own rows, asked for
    ],
)
def test_padding_row_tokens_by_engine_and_setting(cfg: Any, tokens: int | None) -> None:
    assert padding_row_tokens(cfg) == tokens


@pytest.mark.parametrize("value", [1, 0, True, "8", 2.5])
def test_a_bad_setting_names_the_key_and_what_is_valid(value: Any) -> None:
    with pytest.raises(ValueError) as err:
        padding_row_tokens(config(tokens=value))
    assert str(err.value) == BAD.format(value)


def test_config_check_reports_it_before_any_model_loads() -> None:
    cfg = composed("ledger_folding", "+trainer.v1.padding_row_tokens=1")
    assert check_composed(cfg, "ledger_folding") == [f"ledger_folding: {BAD.format(1)}"]
    assert check_composed(composed("ledger_folding", "+trainer.v1.padding_row_tokens=128"), "x") == []


def balanced(tq: Any, qwen_dir: Any, partition: str, tokens: int | None) -> tuple[Any, list[dict], list[dict]]:
    """18 folding rows through verl's real ``_balance_batch`` (4 x 8 rows a mini-batch: 14 padding rows); the
    padding rows' fields and tags, read back from TransferQueue."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from benchmarks.v1_padding import folding_rows, trainer

    keys, fields, tags = folding_rows(16)
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
    step = trainer(qwen_dir, 16, 1, 4, tokens)
    batch = step._balance_batch(tq.KVBatchMeta(partition_id=partition, keys=keys, tags=tags), metrics={})
    pads = [(key, tag) for key, tag in zip(batch.keys, batch.tags, strict=True) if tag.get("is_padding")]
    rows = tq.kv_batch_get(keys=[key for key, _ in pads], partition_id=partition)
    padded = [{name: rows[name][i] for name in ("input_ids", "attention_mask", "response_mask")} for i in range(14)]
    tq.kv_clear(keys=batch.keys, partition_id=partition)
    return SimpleNamespace(rows=len(batch.keys), eos=step.tokenizer.eos_token_id), padded, [t for _, t in pads]


def test_verl_pads_with_two_token_rows_on_fsdp(transfer_queue, qwen_dir) -> None:
    from verl.trainer.ppo import padding_utils

    batch, padded, tags = balanced(transfer_queue, qwen_dir, "pad_default", None)
    assert batch.rows == 32 and len(padded) == 14
    for row, tag in zip(padded, tags, strict=True):
        assert row["input_ids"].tolist() == [batch.eos, batch.eos]  # one prompt token, one response token
        assert row["attention_mask"].tolist() == [1, 1]
        assert row["response_mask"].tolist() == [0]  # no loss
        assert (tag["seq_len"], tag["prompt_len"], tag["response_len"]) == (2, 1, 1)
    assert padding_utils.SYNTHETIC_PADDING_SEQ_LEN == 128  # verl's constant is put back after the call


def test_the_setting_gives_verl_its_own_rows_back(transfer_queue, qwen_dir) -> None:
    batch, padded, tags = balanced(transfer_queue, qwen_dir, "pad_verl", 128)
    assert batch.rows == 32
    assert {len(row["input_ids"]) for row in padded} == {128}
    assert {row["response_mask"].tolist() == [0] for row in padded} == {True}
    assert {tag["seq_len"] for tag in tags} == {128}


def test_the_reliance_fails_when_verl_changes_its_padding_rows(monkeypatch) -> None:
    from verl.trainer.ppo import padding_utils

    from extensions.verl_compat import broken_reliances

    monkeypatch.setattr(padding_utils, "SYNTHETIC_PADDING_SEQ_LEN", 64)
    assert broken_reliances() == [
        "v1 padding rows (trainer/ppo/padding_utils.py, trainer/ppo/v1/trainer_base.py): AssertionError: "
        "SYNTHETIC_PADDING_SEQ_LEN is no longer 128"
    ]


def test_a_bad_setting_stops_the_trainer_before_any_model_loads(transfer_queue, qwen_dir) -> None:
    from benchmarks.v1_padding import trainer

    with pytest.raises(ValueError) as err:
        trainer(qwen_dir, 16, 1, 4, 1)  # verl's PPOTrainer.__init__ (builds the replay buffer; no workers yet)
    assert str(err.value) == f"the trainer's config: {BAD.format(1)}"


def test_the_padding_seconds_are_logged_as_verl_timer(transfer_queue, qwen_dir) -> None:
    """verl gives ``_balance_batch`` no timer: the wrapper adds its seconds to ``timing_raw["balance_batch"]``
    (verl logs ``timing_s/balance_batch``), summed over a step's calls as verl's timers are."""
    import time

    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from benchmarks.v1_padding import folding_rows, trainer

    tq = transfer_queue
    step = trainer(qwen_dir, 16, 1, 4)
    step.timing_raw = {"gen": 1.5}
    seen, walls = [], []
    for partition in ("pad_timed_a", "pad_timed_b"):
        keys, fields, tags = folding_rows(16)
        tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
        started = time.perf_counter()
        batch = step._balance_batch(tq.KVBatchMeta(partition_id=partition, keys=keys, tags=tags), metrics={})
        walls.append(time.perf_counter() - started)
        seen.append(step.timing_raw["balance_batch"])
        assert len(batch.keys) == 32  # padded as without the timer
        tq.kv_clear(keys=batch.keys, partition_id=partition)
    assert set(step.timing_raw) == {"gen", "balance_batch"} and step.timing_raw["gen"] == 1.5
    assert 0 < seen[0] <= walls[0]
    assert 0 < seen[1] - seen[0] <= walls[1]  # the second call's seconds added to the first's
