"""Run summary: accuracy, turns, tool calls, errors, termination reasons, throughput."""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from extensions.rollout.records import TrajectoryRecord, TurnRecord


def _turns(record: TrajectoryRecord) -> list[TurnRecord]:
    """Every turn of the trajectory, earlier segments' first (a folded trajectory's record is its last segment)."""
    return [t for segment in record.segments for t in segment.turns] + list(record.turns)


def summarize(records: list[TrajectoryRecord], wall_s: float) -> dict[str, Any]:
    """Counts are per trajectory over all its segments; a fold's request and summary are not turns of the task."""
    n = len(records)
    generated = sum(sum(r.response_mask) + sum(sum(s.response_mask) for s in r.segments) for r in records)
    rewarded = [r for r in records if r.reward is not None]
    turns = [[t for t in _turns(r) if not (t.fold or t.summary)] for r in records]
    per = {
        "assistant_turns": [sum(t.role == "assistant" for t in ts) for ts in turns],
        "tool_calls": [sum(len(t.tool_calls) for t in ts if t.role == "tool") for ts in turns],
        "tool_errors": [sum(c.error is not None for t in ts if t.role == "tool" for c in t.tool_calls) for ts in turns],
        "user_turns": [sum(t.role == "user" and t.span[1] > t.span[0] for t in ts) for ts in turns],
        "segments": [len(r.segments) + 1 for r in records],
    }
    accuracy = None
    if rewarded:
        acc = [r.reward_extra_info.get("acc", float(r.reward > 0)) for r in rewarded]
        accuracy = round(mean(acc), 4)
    return {
        "trajectories": n,
        "errors": sum(r.termination_reason == "error" for r in records),
        "termination_reasons": dict(Counter(r.termination_reason for r in records).most_common()),
        "accuracy": accuracy,
        "mean_reward": round(mean(r.reward for r in rewarded), 4) if rewarded else None,
        **{f"mean_{k}": round(mean(v), 3) if v else 0.0 for k, v in per.items()},
        # share of trajectories where the user said something back (in gsm8k_ask_user: the agent asked)
        "user_turn_rate": round(mean(n > 0 for n in per["user_turns"]), 4) if n else None,
        "generated_tokens": generated,
        "response_tokens": sum(len(r.response_ids) + sum(len(s.response_ids) for s in r.segments) for r in records),
        "wall_s": round(wall_s, 3),
        "generated_tokens_per_s": round(generated / wall_s, 2) if wall_s > 0 else None,
        "trajectories_per_s": round(n / wall_s, 4) if wall_s > 0 else None,
    }


def format_summary(summary: dict[str, Any]) -> str:
    width = max(len(k) for k in summary)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in summary.items())
