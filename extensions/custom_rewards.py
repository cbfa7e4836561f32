"""verl ``custom_reward_function`` for the pack: outcome + per-turn + per-tool rewards.

Point verl at it (``pkg://`` imports the installed package, so its own imports work too):

    reward.custom_reward_function.path=pkg://extensions.custom_rewards
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.w_turn=0.2     # optional, see RewardSettings

How verl 0.9.1 calls it (NaiveRewardManager.run_single, ``experimental/reward_loop/
reward_manager/naive.py``): ``compute_score(data_source=..., solution_str=..., ground_truth=...,
extra_info=...)`` plus every ``reward_kwargs`` entry, where solution_str is the whole decoded
response, ground_truth is ``reward_model.ground_truth`` and extra_info is the dataset's
extra_info updated with the agent loop's extra_fields (``turn_scores``, ``tool_rewards``,
``extras``, ...) and ``num_turns``/``rollout_reward_scores``. The returned dict's ``score`` is
the reward; every key lands in ``reward_extra_info``, which verl stacks with ``np.array``
across samples, so all samples return the same keys (``REWARD_KEYS``), all floats.

    score = w_outcome * outcome + w_turn * mean(turn_scores) + w_tool * mean(tool_rewards)
            + min(w_exec * num_successful_calls, exec_bonus_cap)   (x outcome if exec_bonus_if_correct)
            - w_format * num_malformed_tool_calls - termination_penalty

An empty list's mean is 0; a trajectory whose termination reason is ``error`` has outcome 0.

A ``data_source`` may carry a variant label after ``@`` (``longflow/ledger@truncated``): it is scored as its base,
and verl, which groups validation metrics by data_source, reports each label apart. So one validation set can hold
several loops' rows (their agent_name column) and measure each, e.g. a baseline beside the trained loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from extensions.errors import SampleError, choices
from extensions.records_schema import COUNTS, TERMINATION_REASONS
from extensions.rewards.gsm8k import LONGFLOW_GSM8K, LONGFLOW_LEDGER, OPENAI_GSM8K, Mode, extract_answer, is_correct
from extensions.rewards.numbers import normalize_number
from extensions.rewards.settings import RewardSettings, parse_reward_kwargs
from extensions.rewards.trajectory import TrajectoryPieces, answer_text, read_pieces

REWARD_KEYS = (
    "score",
    "acc",
    "outcome",
    "answer_found",
    "turn_score_mean",
    "num_turn_scores",
    "tool_reward_mean",
    "num_tool_rewards",
    "format_penalty",
    "exec_bonus",
    "termination_penalty",
    "is_error",
    "is_response_budget",
    *COUNTS,
    *(f"term_{reason}" for reason in sorted(TERMINATION_REASONS)),
)
"""Keys of every returned dict, in order; all values are floats. The counts and the ``term_<reason>``
one-hot (1.0 for the reason the trajectory ended with) feed ``longflow/val/`` metrics."""

BUDGET_REASONS = ("response_budget", "repeat_loop", "max_segments")
"""Termination reasons that cost ``budget_penalty``: the trajectory ran out, or a bound cut its loop short."""

# An outcome scorer: (answer text, ground truth, mode, termination reason) -> (answer is right, an answer was found).
OutcomeScorer = Callable[[str, str, Mode, str], tuple[bool, bool]]


def score_gsm8k(text: str, ground_truth: str, mode: Mode, termination_reason: str = "") -> tuple[bool, bool]:
    """Score a GSM8K answer: extract a number from ``text`` and compare it with ``ground_truth``. A reply that
    ended for one of ``NO_ANSWER_REASONS`` has no answer (``rewards/gsm8k.py``)."""
    truth = normalize_number(ground_truth)
    if truth is None:
        raise SampleError(f"ground_truth {ground_truth!r} is not a number; GSM8K ground truths look like '72'")
    answer = extract_answer(text, mode, termination_reason)
    return is_correct(answer, truth), answer is not None


SCORERS: dict[str, OutcomeScorer] = {
    OPENAI_GSM8K: score_gsm8k,
    LONGFLOW_GSM8K: score_gsm8k,
    LONGFLOW_LEDGER: score_gsm8k,
}
"""Outcome scorer per ``data_source`` (the paged ledger's answer is a ``#### <number>`` too)."""
LABEL_SEP = "@"
"""What separates a data_source from its variant label (module docstring)."""


def split_label(data_source: Any) -> tuple[str, str | None]:
    """``longflow/ledger@truncated`` -> (``longflow/ledger``, ``truncated``); no label -> (data_source, None)."""
    base, _, label = str(data_source).partition(LABEL_SEP)
    return base, label or None


def combine(acc: bool, answer_found: bool, pieces: TrajectoryPieces, settings: RewardSettings) -> dict[str, float]:
    """Weigh the outcome and the trajectory pieces into the returned dict (keys ``REWARD_KEYS``)."""
    reason = pieces.termination_reason
    outcome = 0.0 if reason == "error" else float(acc)
    turn_mean = _mean(pieces.turn_scores)
    tool_mean = _mean(pieces.tool_rewards)
    format_penalty = settings.w_format * pieces.num_malformed_tool_calls
    exec_bonus = min(settings.w_exec * pieces.num_successful_calls, settings.exec_bonus_cap)
    if settings.exec_bonus_if_correct and not outcome:
        exec_bonus = 0.0
    penalties = {"error": settings.error_penalty, **dict.fromkeys(BUDGET_REASONS, settings.budget_penalty)}
    termination_penalty = penalties.get(reason, 0.0)
    score = (
        settings.w_outcome * outcome
        + settings.w_turn * turn_mean
        + settings.w_tool * tool_mean
        + exec_bonus
        - format_penalty
        - termination_penalty
    )
    values = {
        "score": score,
        "acc": float(acc),
        "outcome": outcome,
        "answer_found": float(answer_found),
        "turn_score_mean": turn_mean,
        "num_turn_scores": float(len(pieces.turn_scores)),
        "tool_reward_mean": tool_mean,
        "num_tool_rewards": float(len(pieces.tool_rewards)),
        "format_penalty": float(format_penalty),
        "exec_bonus": float(exec_bonus),
        "termination_penalty": float(termination_penalty),
        "is_error": float(reason == "error"),
        "is_response_budget": float(reason == "response_budget"),
        **{key: float(getattr(pieces, key)) for key in COUNTS},
        **{f"term_{name}": float(reason == name) for name in TERMINATION_REASONS},
    }
    return {key: float(values[key]) for key in REWARD_KEYS}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | int | float,
    extra_info: Mapping[str, Any] | None = None,
    **reward_kwargs: Any,
) -> dict[str, float]:
    """verl's reward entry point; see the module docstring for the formula and what verl passes."""
    settings = parse_reward_kwargs(reward_kwargs)
    scorer = SCORERS.get(split_label(data_source)[0])
    if scorer is None:
        raise SampleError(
            f"compute_score: unknown data_source {str(data_source)!r}; supported: {choices(SCORERS)}, each "
            f"optionally with a label after {LABEL_SEP!r}. "
            "Fix the dataset's data_source column or add a scorer to SCORERS in extensions/custom_rewards.py"
        )
    sample = f"data_source {str(data_source)!r} sample index {(extra_info or {}).get('index', '?')}"
    pieces = read_pieces(extra_info, sample=sample)
    try:
        text = answer_text(solution_str, pieces)
        acc, answer_found = scorer(text, str(ground_truth), settings.mode, pieces.termination_reason)
    except SampleError as exc:
        raise SampleError(f"{sample}: {exc}") from None
    result = combine(acc, answer_found, pieces, settings)
    if not math.isfinite(result["score"]):
        raise SampleError(f"{sample}: the final score is {result['score']!r}; scores must be finite numbers")
    return result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
