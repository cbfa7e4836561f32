"""turn_grpo and gigpo_turn (extensions/custom_advantages.py): exact tensors, on CPU, also through verl.

Run: ``PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_custom_advantages.py``
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from verl.protocol import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos

from extensions import custom_advantages as ca
from extensions.errors import ConfigError, SampleError, choices

with warnings.catch_warnings():
    # verl.workers.engine warns once per missing optional engine (torchtitan, veomni, megatron, ...) on CPU.
    warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

EPS = 1e-6


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    ca.register_estimators()
    previous = ca.set_rows_provider(None)  # each test sets its own; the plugin's seam provider comes back after
    yield
    ca.set_rows_provider(previous)


def turn(start: int, end: int, reward: float | None = None, anchor: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"role": "assistant", "span": [start, end]}
    if reward is not None:
        record["reward"] = reward
    if anchor is not None:
        record["anchor"] = anchor
    return record


def other(role: str, start: int, end: int) -> dict[str, Any]:
    return {"role": role, "span": [start, end]}


def z(values: list[float], norm_by_std: bool = True) -> list[float]:
    """verl's GRPO normalisation of hand-computed returns, as a list."""
    g = torch.tensor(values)
    centred = g - g.mean()
    return (centred / (g.std() + EPS) if norm_by_std else centred).tolist()


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def proto(rewards: torch.Tensor, mask: torch.Tensor, uids: np.ndarray) -> DataProto:
    """A batch as verl's trainers hand it to compute_advantage (fresh tensors: verl writes into the batch)."""
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards.clone(), "response_mask": mask.clone()}, non_tensors={"uid": uids}
    )


# Group "a", three rows of 10 response tokens.
#   row 0: assistant [0,3) r=0.5 | tool [3,5) | assistant [5,8) (no reward) | pad;  S = 1.5 at token 7
#   row 1: assistant [0,4) r=0.25 | pad;                                            S = 0.0
#   row 2: assistant [0,2) r=-0.5 | tool [2,4) | assistant [4,6) r=0.5 | user [6,7) | assistant [7,9) r=0,
#          token 8 is mask 0 (thinking out of the loss);                            S = 0.5 + 1.0 (tokens 5, 8)
# gamma = 1: G(row 0) = [1.5, 1.0], G(row 1) = [0.0], G(row 2) = [1.5, 2.0, 1.5]
REWARDS = t(
    [
        [0, 0, 0, 0, 0, 0, 0, 1.5, 0, 0],
        [0] * 10,
        [0, 0, 0, 0, 0, 0.5, 0, 0, 1.0, 0],
    ]
)
MASK = t(
    [
        [1, 1, 1, 0, 0, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 1, 1, 0, 1, 0, 0],
    ]
)
UIDS = np.array(["a", "a", "a"], dtype=object)
ROWS: list[dict[str, Any] | None] = [
    {"turns": [turn(0, 3, 0.5), other("tool", 3, 5), turn(5, 8)]},
    {"turns": [turn(0, 4, 0.25)]},
    {"turns": [turn(0, 2, -0.5), other("tool", 2, 4), turn(4, 6, 0.5), other("user", 6, 7), turn(7, 9, 0.0)]},
]


def test_turn_grpo_hand_computed_without_std() -> None:
    adv, stats = ca.turn_level_advantages(REWARDS, MASK, UIDS, ROWS, gamma=1.0, norm_by_std=False)
    # returns G: row 0 (1.5, 1.0), row 1 (0.0), row 2 (1.5, 2.0, 1.5); N = 3 at every turn:
    # k=1: mean(1.5, 0, 1.5) = 1 -> 0.5, -1, 0.5; k=2: (1.0 + 2.0) / 3 = 1 -> 0, 1; k=3: 1.5 / 3 -> 1.5 - 0.5 = 1
    expected = t(
        [
            [0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0],
            [-1, -1, -1, -1, 0, 0, 0, 0, 0, 0],
            [0.5, 0.5, 0, 0, 1, 1, 0, 1, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)
    assert stats["inherited_turns"] == 0 and stats == ca.LAST_STATS


def test_turn_grpo_hand_computed_with_std() -> None:
    adv, _ = ca.turn_level_advantages(REWARDS, MASK, UIDS, ROWS, gamma=1.0, norm_by_std=True)
    (a0, a1, a2) = z([1.5, 0.0, 1.5])
    # turns k > 1: one scale per group, the std of every row's returns zero-padded to 3 turns
    scale = torch.std(t([1.5, 1.0, 0.0, 0.0, 0.0, 0.0, 1.5, 2.0, 1.5])) + EPS
    b0, b2, c2 = (t(1.0) - 1.0) / scale, (t(2.0) - 1.0) / scale, (t(1.5) - 0.5) / scale
    expected = t(
        [
            [a0, a0, a0, 0, 0, b0, b0, b0, 0, 0],
            [a1, a1, a1, a1, 0, 0, 0, 0, 0, 0],
            [a2, a2, 0, 0, b2, b2, 0, c2, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)


def test_turn_grpo_per_index_hand_computed_without_std() -> None:
    adv, stats = ca.turn_level_advantages(REWARDS, MASK, UIDS, ROWS, gamma=1.0, norm_by_std=False, per_index=True)
    # k=1: mean(1.5, 0, 1.5) = 1 -> 0.5, -1, 0.5; k=2: mean(1.0, 2.0) = 1.5 -> -0.5, 0.5; k=3: row 2 alone inherits 0.5
    expected = t(
        [
            [0.5, 0.5, 0.5, 0, 0, -0.5, -0.5, -0.5, 0, 0],
            [-1, -1, -1, -1, 0, 0, 0, 0, 0, 0],
            [0.5, 0.5, 0, 0, 0.5, 0.5, 0, 0.5, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)
    assert stats == {
        "estimator": "turn_grpo",
        "rows": 3,
        "fallback_rows": 0,
        "fallback_reasons": {},
        "assistant_turns": 6,
        "uncovered_mask_tokens": 0,
        "inherited_turns": 1,
    }
    assert stats == ca.LAST_STATS


def test_turn_grpo_per_index_hand_computed_with_std() -> None:
    adv, _ = ca.turn_level_advantages(REWARDS, MASK, UIDS, ROWS, gamma=1.0, norm_by_std=True, per_index=True)
    (a0, a1, a2), (b0, b2) = z([1.5, 0.0, 1.5]), z([1.0, 2.0])
    expected = t(
        [
            [a0, a0, a0, 0, 0, b0, b0, b0, 0, 0],
            [a1, a1, a1, a1, 0, 0, 0, 0, 0, 0],
            [a2, a2, 0, 0, b2, b2, 0, b2, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)


def test_discounting_across_turns_with_gamma_half() -> None:
    # row 0: r = 0.5, 0.25, 0 and S = 1 -> R = 0.5, 0.25, 0.25 -> G3 = 0.25, G2 = 0.375, G1 = 0.6875
    # row 1: all zero -> G = 0, 0, 0. Means: 0.34375, 0.1875, 0.125.
    assert ca.turn_returns(1.0, [0.5, 0.25, 0.0], gamma=0.5) == [0.6875, 0.375, 0.25]
    rewards = t([[0, 0, 0, 0, 0, 1.0], [0] * 6])
    mask = torch.ones(2, 6)
    spans = [turn(0, 2, 0.5), turn(2, 4, 0.25), turn(4, 6, 0.0)]
    rows = [{"turns": spans}, {"turns": [turn(0, 2), turn(2, 4), turn(4, 6)]}]
    adv, _ = ca.turn_level_advantages(rewards, mask, np.array(["q", "q"], dtype=object), rows, 0.5, False)
    assert torch.equal(
        adv, t([[0.34375] * 2 + [0.1875] * 2 + [0.125] * 2, [-0.34375] * 2 + [-0.1875] * 2 + [-0.125] * 2])
    )
    adv_gamma1, _ = ca.turn_level_advantages(rewards, mask, np.array(["q", "q"], dtype=object), rows, 1.0, False)
    # gamma = 1: G(row 0) = 1, 0.5, 0.25 -> halves
    assert torch.equal(adv_gamma1, t([[0.5] * 2 + [0.25] * 2 + [0.125] * 2, [-0.5] * 2 + [-0.25] * 2 + [-0.125] * 2]))


@pytest.mark.parametrize("gamma", [1.0, 0.5])
def test_identical_trajectories_give_zero(gamma: float) -> None:
    rows = [{"turns": [turn(0, 3, 0.25, "p"), other("tool", 3, 5), turn(5, 8, -0.5, "s1")]} for _ in range(3)]
    rewards = torch.zeros(3, 10)
    rewards[:, 7] = 0.75
    mask = MASK[[0, 0, 0]]
    uids = np.array(["a"] * 3, dtype=object)
    adv, _ = ca.turn_level_advantages(rewards, mask, uids, rows, gamma, True)
    assert torch.equal(adv, torch.zeros(3, 10))
    adv, _ = ca.gigpo_advantages(rewards, mask, uids, rows, gamma, True, step_weight=1.0)
    assert torch.equal(adv, torch.zeros(3, 10))


def random_single_turn_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, list[dict | None]]:
    """Groups of 4, 3, 1 and 5 rows, one assistant turn each, random scores and lengths, some rows without records."""
    gen = torch.Generator().manual_seed(seed)
    uids = np.array(["u0"] * 4 + ["u1"] * 3 + ["u2"] + ["u3"] * 5, dtype=object)
    bs, length = len(uids), 16
    lengths = torch.randint(1, length + 1, (bs,), generator=gen)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.int64)
    rewards = torch.zeros(bs, length)
    rewards[torch.arange(bs), lengths - 1] = torch.randn(bs, generator=gen)
    process = torch.randn(bs, generator=gen).tolist()
    rows: list[dict | None] = [
        None if i in (2, 9) else {"turns": [turn(0, int(lengths[i]), process[i], f"prompt-{uids[i]}")]}
        for i in range(bs)
    ]
    return rewards, mask, uids, rows


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_single_turn_batch_equals_verl_grpo_exactly(norm_by_std: bool) -> None:
    rewards, mask, uids, rows = random_single_turn_batch(seed=7)
    verl_adv, verl_ret = core_algos.compute_grpo_outcome_advantage(
        rewards, mask, uids, norm_adv_by_std_in_grpo=norm_by_std
    )
    for gamma in (1.0, 0.9):
        adv, stats = ca.turn_level_advantages(rewards, mask, uids, rows, gamma, norm_by_std)
        assert torch.equal(adv, verl_adv)
        assert stats["fallback_rows"] == 2
        adv, _ = ca.turn_level_advantages(rewards, mask, uids, None, gamma, norm_by_std)
        assert torch.equal(adv, verl_adv)
    no_anchor = [None if r is None else {"turns": [{**r["turns"][0], "anchor": None}]} for r in rows]
    adv, stats = ca.gigpo_advantages(rewards, mask, uids, no_anchor, 1.0, norm_by_std)
    assert torch.equal(adv, verl_adv) and stats["step_groups"] == 0
    # through verl's compute_advantage with the registered name, rows from the provider
    ca.set_rows_provider(lambda: rows)
    config = AlgoConfig(adv_estimator="turn_grpo", norm_adv_by_std_in_grpo=norm_by_std)
    data = proto(rewards, mask, uids)
    out = compute_advantage(data, adv_estimator="turn_grpo", config=config)
    assert torch.equal(out.batch["advantages"], verl_ret) and torch.equal(out.batch["returns"], verl_ret)


def test_mask_zero_tokens_get_zero() -> None:
    gen = torch.Generator().manual_seed(3)
    bs, length = 6, 24
    mask = (torch.rand(bs, length, generator=gen) > 0.4).to(torch.float32)
    rewards = torch.zeros(bs, length)
    rewards[:, -1] = torch.randn(bs, generator=gen)
    rows = [{"turns": [turn(0, 8, 0.1, "p"), turn(8, 16, -0.2, f"s{i % 2}"), turn(16, 24, 0.3)]} for i in range(bs)]
    uids = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    for adv, _ in (
        ca.turn_level_advantages(rewards, mask, uids, rows, 0.9, True),
        ca.gigpo_advantages(rewards, mask, uids, rows, 0.9, True, 0.5),
    ):
        assert torch.equal(adv[mask == 0], torch.zeros(int((mask == 0).sum())))
        assert bool((adv[mask == 1] != 0).all())


def test_rows_without_records_fall_back_to_the_episode_advantage(caplog: pytest.LogCaptureFixture) -> None:
    rows = [ROWS[0], None, {"turns": [turn(0, 2, 0.0), turn(3, 99, 0.0)]}]  # row 2: a span past the response
    with caplog.at_level(logging.WARNING, logger="extensions.turn_credit"):
        adv, stats = ca.turn_level_advantages(REWARDS, MASK, UIDS, rows, 1.0, False)
    # k=1 over G = 1.5 (row 0), S = 0 (row 1), S = 1.5 (row 2) -> 0.5, -1, 0.5; at k=2 row 0 is the only row with
    # records: the fallback rows are not in N (N = 1, baseline 0), so its G_2 = 1.0 stays
    second = 1.0
    expected = t(
        [
            [0.5, 0.5, 0.5, 0, 0, second, second, second, 0, 0],
            [-1, -1, -1, -1, 0, 0, 0, 0, 0, 0],
            [0.5, 0.5, 0, 0, 0.5, 0.5, 0, 0.5, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)
    assert stats["fallback_rows"] == ca.LAST_STATS["fallback_rows"] == 2
    assert stats["fallback_reasons"] == {"bad_span": 1, "no_records": 1}
    assert [r.getMessage() for r in caplog.records if r.name == "extensions.turn_credit"] == [
        "turn_grpo: 2 of 3 rows have no usable per-turn records (bad_span: 1, no_records: 1); "
        "they use the outcome (GRPO) advantage"
    ]


def test_fallback_rows_stay_out_of_their_groups_later_turn_baselines() -> None:
    """Row 1 has no records: it takes part in turn 1's GRPO, but not in N or sigma of turns k > 1."""
    adv, stats = ca.turn_level_advantages(REWARDS, MASK, UIDS, [ROWS[0], None, ROWS[2]], gamma=1.0, norm_by_std=True)
    (a0, a1, a2) = z([1.5, 0.0, 1.5])
    # rows 0 and 2 only: N = 2, sigma = std of their zero-padded returns (1.5, 1.0, 0) and (1.5, 2.0, 1.5)
    scale = torch.std(t([1.5, 1.0, 0.0, 1.5, 2.0, 1.5])) + EPS
    b0, b2, c2 = (t(1.0) - 1.5) / scale, (t(2.0) - 1.5) / scale, (t(1.5) - 0.75) / scale
    expected = t(
        [
            [a0, a0, a0, 0, 0, b0, b0, b0, 0, 0],
            [a1, a1, a1, a1, 0, 0, 0, 0, 0, 0],
            [a2, a2, 0, 0, b2, b2, 0, c2, 0, 0],
        ]
    )
    assert torch.equal(adv, expected)
    assert stats["fallback_rows"] == 1


def test_a_non_finite_score_or_process_reward_is_an_error_naming_the_row() -> None:
    rewards = REWARDS.clone()
    rewards[2, 8] = float("nan")
    with pytest.raises(SampleError) as err:
        ca.turn_level_advantages(rewards, MASK, UIDS, ROWS, gamma=1.0, norm_by_std=True)
    assert str(err.value) == "turn_grpo: the score of 1 of 3 rows is not finite: row 2 (uid a)"
    rows = [ROWS[0], ROWS[1], {"turns": [turn(0, 2, -0.5), turn(4, 6, float("inf"))]}]
    with pytest.raises(SampleError) as err:
        ca.turn_level_advantages(REWARDS, MASK, UIDS, rows, gamma=1.0, norm_by_std=True)
    assert str(err.value) == (
        "turn_grpo: row 2 (uid a): assistant turn 1's reward is inf; process rewards must be finite numbers"
    )
    steps = {"turns": [{**turn(0, 9, 0.5), "code_calls": [{"span": [2, 4]}], "step_rewards": [float("nan"), 0.5]}]}
    with pytest.raises(SampleError, match=r"^step_rewards\[0\] is nan; process rewards must be finite numbers$"):
        ca.parse_turns(steps, length=10)


@pytest.mark.parametrize(
    ("extras", "reason"),
    [
        (None, "no_records"),
        ({"termination_reason": "error"}, "no_records"),
        ({"turns": [other("user", 0, 3)]}, "no_assistant_turns"),
        ({"turns": [turn(4, 6), turn(2, 3)]}, "bad_span"),
        ({"turns": [{"role": "assistant", "span": [0, "3"]}]}, "bad_span"),
        ({"turns": [{"role": "assistant", "span": [0, 3], "reward": "1"}]}, "bad_reward"),
    ],
)
def test_unusable_records_name_their_reason(extras: Any, reason: str) -> None:
    assert ca.parse_turns(extras, length=10) == (None, reason)


def test_parse_turns_defaults() -> None:
    parsed, reason = ca.parse_turns({"turns": [turn(0, 3), other("tool", 3, 5), turn(5, 5, 1, "")]}, 10)
    assert reason is None
    assert parsed == [ca.AssistantTurn(0, 3, 0.0, None), ca.AssistantTurn(5, 5, 1.0, None)]


def test_through_verl_compute_advantage_and_the_v1_path() -> None:
    ca.set_rows_provider(lambda: ROWS)
    config = AlgoConfig(adv_estimator="turn_grpo", gamma=1.0, norm_adv_by_std_in_grpo=False)
    expected = t(
        [
            [0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0],
            [-1, -1, -1, -1, 0, 0, 0, 0, 0, 0],
            [0.5, 0.5, 0, 0, 1, 1, 0, 1, 0, 0],
        ]
    )

    out = compute_advantage(proto(REWARDS, MASK, UIDS), adv_estimator="turn_grpo", config=config)
    assert torch.equal(out.batch["advantages"], expected) and torch.equal(out.batch["returns"], expected)
    keys = [f"a_{session}_0" for session in range(3)]
    out = compute_advantage_for_multi_trajectories(
        proto(REWARDS, MASK, UIDS), batch_keys=keys, adv_estimator="turn_grpo", config=config
    )
    assert torch.equal(out.batch["advantages"], expected)
    ca.set_rows_provider(None)
    out = compute_advantage(proto(REWARDS, MASK, UIDS), adv_estimator="turn_grpo", config=config)
    verl_adv, _ = core_algos.compute_grpo_outcome_advantage(REWARDS, MASK, UIDS, norm_adv_by_std_in_grpo=False)
    assert torch.equal(out.batch["advantages"], verl_adv)
    assert ca.LAST_STATS["fallback_rows"] == 3


def test_missing_uid_names_the_column() -> None:
    with pytest.raises(ValueError, match=r"^turn_grpo groups rows by prompt and needs the batch's 'uid' column"):
        ca.compute_turn_grpo_advantage(REWARDS, MASK, index=None, config=AlgoConfig())


def test_rows_of_another_length_fail_loudly() -> None:
    with pytest.raises(ValueError, match=r"^gigpo_turn: the rows provider gave 2 records for a batch of 3 rows$"):
        ca.gigpo_advantages(REWARDS, MASK, UIDS, ROWS[:2])


def test_unknown_estimator_verl_lists_nothing_the_pack_lists_all() -> None:
    data = proto(REWARDS, MASK, UIDS)
    with pytest.raises(ValueError) as verl_error:
        compute_advantage(data, adv_estimator="turn_gpro", config=AlgoConfig(adv_estimator="turn_gpro"))
    assert str(verl_error.value) == "Unknown advantage estimator simply: turn_gpro"  # verl 0.9.1: no list
    with pytest.raises(ConfigError) as ours:
        ca.check_estimator_name("turn_gpro")
    assert str(ours.value) == (
        "algorithm.adv_estimator='turn_gpro' is not a registered advantage estimator; "
        f"choose one of: {choices(core_algos.ADV_ESTIMATOR_REGISTRY)}"
    )
    assert "'gigpo_turn'" in str(ours.value) and "'turn_grpo'" in str(ours.value) and "'grpo'" in str(ours.value)
    ca.check_estimator_name("turn_grpo")
    ca.check_estimator_name(core_algos.AdvantageEstimator.GRPO)


def test_register_estimators_is_idempotent() -> None:
    names = ["gigpo_turn", "turn_grpo", "turn_grpo_per_index"]
    assert ca.register_estimators() == ca.register_estimators() == names
    assert core_algos.get_adv_estimator_fn("turn_grpo_per_index") is ca.compute_turn_grpo_per_index_advantage
    assert core_algos.get_adv_estimator_fn("turn_grpo") is ca.compute_turn_grpo_advantage
    assert core_algos.get_adv_estimator_fn("gigpo_turn") is ca.compute_gigpo_turn_advantage
