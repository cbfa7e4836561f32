"""The weighted reward: exact numbers, missing pieces, error trajectories, the returned dict's shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from extensions.custom_rewards import REWARD_KEYS, compute_score
from extensions.errors import ConfigError, SampleError

WEIGHTS = {"w_outcome": 1.0, "w_turn": 0.5, "w_tool": 0.25, "w_format": 0.125}


def trajectory(reason: str = "final_answer", **extras: Any) -> dict[str, Any]:
    """An extra_info as verl builds it: dataset extra_info plus the agent loop's extra_fields."""
    return {
        "split": "train",
        "index": 3,
        "turn_scores": [1.0, 0.0, 0.5],
        "tool_rewards": [1.0, 0.0],
        "extras": {"termination_reason": reason, "num_malformed_tool_calls": 2, "num_tool_calls": 4, **extras},
        "num_turns": 7,
        "rollout_reward_scores": {},
    }


def test_weighted_combination_exact() -> None:
    result = compute_score("longflow/gsm8k", "#### 72", "72", trajectory(), **WEIGHTS)
    # 1.0*1 + 0.5*mean(1, 0, 0.5) + 0.25*mean(1, 0) - 0.125*2 = 1 + 0.25 + 0.125 - 0.25
    assert result == {
        "score": 1.125,
        "acc": 1.0,
        "outcome": 1.0,
        "answer_found": 1.0,
        "turn_score_mean": 0.5,
        "num_turn_scores": 3.0,
        "tool_reward_mean": 0.5,
        "num_tool_rewards": 2.0,
        "num_malformed_tool_calls": 2.0,
        "num_tool_calls": 4.0,
        "format_penalty": 0.25,
        "exec_bonus": 0.0,
        "num_executed_calls": 0.0,
        "num_successful_calls": 0.0,
        "num_invented_outputs": 0.0,
        "num_repeated_blocks": 0.0,
        "termination_penalty": 0.0,
        "is_error": 0.0,
        "is_response_budget": 0.0,
        "num_assistant_turns": 0.0,
        "num_tool_rounds": 0.0,
        "num_user_turns": 0.0,
        "num_tool_errors": 0.0,
        "term_error": 0.0,
        "term_folded": 0.0,
        "term_final_answer": 1.0,
        "term_interaction_done": 0.0,
        "term_max_assistant_turns": 0.0,
        "term_max_segments": 0.0,
        "term_max_tool_rounds": 0.0,
        "term_max_user_turns": 0.0,
        "term_prompt_too_long": 0.0,
        "term_repeat_loop": 0.0,
        "term_response_budget": 0.0,
        "term_time_budget": 0.0,
    }


def test_wrong_answer_keeps_shaping_terms() -> None:
    result = compute_score("longflow/gsm8k", "#### 71", "72", trajectory(), **WEIGHTS)
    assert (result["score"], result["acc"], result["answer_found"]) == (0.125, 0.0, 1.0)


def test_defaults_are_the_plain_outcome() -> None:
    assert compute_score("openai/gsm8k", "#### 72", "72", trajectory())["score"] == 1.0
    assert compute_score("openai/gsm8k", "#### 7", "72", trajectory())["score"] == 0.0


def test_missing_pieces_count_as_empty_or_zero() -> None:
    for extra_info in (None, {}, {"index": 0, "turn_scores": None, "tool_rewards": [], "extras": None}):
        result = compute_score("openai/gsm8k", "#### 72", "72", extra_info, **WEIGHTS)
        assert result["score"] == 1.0
        assert result["turn_score_mean"] == result["num_turn_scores"] == 0.0
        assert result["tool_reward_mean"] == result["num_tool_rewards"] == 0.0
        assert result["num_malformed_tool_calls"] == result["termination_penalty"] == 0.0


def test_numpy_pieces_are_accepted() -> None:
    extra_info = {"turn_scores": np.array([0.25, 0.75]), "extras": {"num_malformed_tool_calls": np.int64(1)}}
    result = compute_score("openai/gsm8k", "#### 72", "72", extra_info, **WEIGHTS)
    assert result["score"] == 1.0 + 0.5 * 0.5 - 0.125


def test_error_trajectory_has_outcome_zero_and_its_penalty() -> None:
    result = compute_score(
        "longflow/gsm8k", "#### 72", "72", trajectory("error"), **WEIGHTS, error_penalty=0.5, budget_penalty=0.25
    )
    # an error trajectory has no answer (rewards/gsm8k.py): 0 + 0.25 + 0.125 - 0.25 - 0.5
    assert (result["acc"], result["outcome"], result["is_error"]) == (0.0, 0.0, 1.0)
    assert (result["termination_penalty"], result["score"]) == (0.5, -0.375)


def test_response_budget_penalty() -> None:
    result = compute_score("longflow/gsm8k", "#### 72", "72", trajectory("response_budget"), budget_penalty=0.25)
    # a reply cut off by the budget has no answer, whatever number it ended on
    assert (result["score"], result["outcome"], result["is_response_budget"]) == (-0.25, 0.0, 1.0)


@pytest.mark.parametrize(
    ("extra_info", "solution", "mode"),
    [
        (None, "#### 72", "strict"),
        (trajectory("max_tool_rounds"), "no answer", "flexible"),
        (trajectory("error"), "<think>", "strict"),
    ],
)
def test_every_sample_returns_the_same_float_keys(extra_info: Any, solution: str, mode: str) -> None:
    result = compute_score("openai/gsm8k", solution, "72", extra_info, mode=mode)
    assert tuple(result) == REWARD_KEYS
    assert all(type(value) is float for value in result.values())


def test_results_stack_like_verl_does() -> None:
    """agent_loop.py builds reward_extra_info columns with np.array([info[key] for info in infos])."""
    infos = [compute_score("openai/gsm8k", text, "72", info) for text, info in [("#### 72", None), ("x", trajectory())]]
    columns = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    assert all(column.dtype == np.float64 and column.shape == (2,) for column in columns.values())


def test_unknown_data_source_names_the_supported_ones() -> None:
    with pytest.raises(SampleError) as info:
        compute_score("lighteval/MATH", "#### 72", "72")
    assert str(info.value) == (
        "compute_score: unknown data_source 'lighteval/MATH'; supported: 'longflow/gsm8k', 'longflow/ledger', "
        "'openai/gsm8k', each optionally with a label after '@'. "
        "Fix the dataset's data_source column or add a scorer to SCORERS in extensions/custom_rewards.py"
    )
    with pytest.raises(SampleError) as info:
        compute_score("lighteval/MATH@longflow/ledger", "#### 72", "72")  # the label is after '@', not the source
    assert str(info.value).startswith("compute_score: unknown data_source 'lighteval/MATH@longflow/ledger'; ")


def test_a_labelled_data_source_is_scored_as_its_base() -> None:
    """longflow/ledger@truncated: one validation set, each loop's rows reported apart by verl, scored alike."""
    for text in ("#### 72", "#### 71", "no answer"):
        base = compute_score("longflow/ledger", text, "72", trajectory())
        assert compute_score("longflow/ledger@truncated", text, "72", trajectory()) == base
    assert compute_score("longflow/ledger@truncated", "#### 72", "72", trajectory())["acc"] == 1.0


def test_bad_reward_kwargs_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        compute_score("openai/gsm8k", "#### 72", "72", w_turns=0.5, mode="loose")
    assert str(info.value) == (
        "reward_kwargs: key 'mode': Input should be 'strict' or 'flexible' (got 'loose')\n"
        "reward_kwargs: unknown key 'w_turns'; valid keys: 'budget_penalty', 'error_penalty', "
        "'exec_bonus_cap', 'exec_bonus_if_correct', 'mode', 'w_exec', 'w_format', 'w_outcome', 'w_tool', "
        "'w_turn'"
    )


def test_verl_router_kwargs_are_accepted() -> None:
    result = compute_score("openai/gsm8k", "#### 72", "72", reward_router_address=None, reward_model_tokenizer=None)
    assert result["score"] == 1.0


@pytest.mark.parametrize(
    ("extra_info", "message"),
    [
        (
            {"index": 5, "extras": {"termination_reason": "timeout"}},
            "data_source 'openai/gsm8k' sample index 5: unknown extras.termination_reason 'timeout'; expected one "
            "of 'error', 'final_answer', 'folded', 'interaction_done', 'max_assistant_turns', 'max_segments', "
            "'max_tool_rounds', 'max_user_turns', 'prompt_too_long', 'repeat_loop', 'response_budget', 'time_budget'",
        ),
        (
            {"index": 5, "turn_scores": [1.0, "good"]},
            "data_source 'openai/gsm8k' sample index 5: turn_scores must hold numbers only; got 'good'",
        ),
        (
            {"index": 5, "turn_scores": [1.0, float("nan")]},
            "data_source 'openai/gsm8k' sample index 5: turn_scores[1] is nan (from the interaction (user)); scores "
            "must be finite numbers, and one NaN would poison its whole GRPO group",
        ),
        (
            {"index": 5, "tool_rewards": np.array([float("inf")])},
            "data_source 'openai/gsm8k' sample index 5: tool_rewards[0] is inf (from a tool call); scores must be "
            "finite numbers, and one NaN would poison its whole GRPO group",
        ),
        (
            {"index": 5, "extras": {"num_malformed_tool_calls": -1}},
            "data_source 'openai/gsm8k' sample index 5: extras.num_malformed_tool_calls must be a non-negative "
            "integer, got -1",
        ),
    ],
)
def test_bad_trajectory_record(extra_info: dict[str, Any], message: str) -> None:
    with pytest.raises(SampleError) as info:
        compute_score("openai/gsm8k", "#### 72", "72", extra_info)
    assert str(info.value) == message


def test_a_non_finite_final_score_names_the_sample() -> None:
    with pytest.raises(SampleError) as info:
        # finite pieces whose weighted sum overflows
        compute_score(
            "openai/gsm8k", "#### 72", "72", {"index": 3, "turn_scores": [1.0]}, w_outcome=1e308, w_turn=1e308
        )
    assert (
        str(info.value)
        == "data_source 'openai/gsm8k' sample index 3: the final score is inf; scores must be finite numbers"
    )


def test_bad_ground_truth() -> None:
    with pytest.raises(SampleError) as info:
        compute_score("openai/gsm8k", "#### 72", "seventy-two", {"index": 1})
    assert str(info.value) == (
        "data_source 'openai/gsm8k' sample index 1: ground_truth 'seventy-two' is not a number; "
        "GSM8K ground truths look like '72'"
    )
