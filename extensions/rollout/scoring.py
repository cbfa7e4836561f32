"""Reward the driver's trajectories with the experiment's ``custom_reward_function``, as verl would.

verl's reward loop (``experimental/reward_loop/reward_manager/naive.py``) calls
``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)`` plus the
configured ``reward_kwargs``; ``extra_info`` is the sample's extra_info updated with the
agent loop's extra_fields and ``num_turns``. We do the same, per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig
from verl.trainer.ppo.reward import get_custom_reward_fn

from extensions.rollout.records import TrajectoryRecord


def load_reward_fn(config: DictConfig) -> Callable[..., Any] | None:
    """verl's own loader: the configured function with its reward_kwargs bound (None if unset)."""
    return get_custom_reward_fn(config)


def score(record: TrajectoryRecord, fn: Callable[..., Any], tokenizer: Any, extras: dict[str, Any] | None) -> None:
    """Fill ``record.reward`` and ``record.reward_extra_info``; a scoring error is recorded, not raised."""
    extra_info = {
        "index": record.index,
        "turn_scores": record.turn_scores,
        "tool_rewards": record.tool_rewards,
        "extras": extras,
        "num_turns": len(record.turns) + 1,
    }
    try:
        result = fn(
            data_source=record.data_source,
            solution_str=tokenizer.decode(record.response_ids, skip_special_tokens=True),
            ground_truth=record.ground_truth,
            extra_info=extra_info,
        )
    except Exception as exc:
        record.reward, record.reward_extra_info = 0.0, {}
        record.error = (record.error + "; " if record.error else "") + f"reward failed: {type(exc).__name__}: {exc}"
        return
    if isinstance(result, dict):
        record.reward = float(result["score"])
        record.reward_extra_info = {k: float(v) for k, v in result.items() if isinstance(v, (int, float, bool))}
    else:
        record.reward = float(result)
