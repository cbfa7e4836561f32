"""Run summary: accuracy, turns, tool calls, errors, termination reasons, throughput."""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from extensions.rollout.records import TrajectoryRecord


def summarize(records: list[TrajectoryRecord], wall_s: float) -> dict[str, Any]:
    n = len(records)
    generated = sum(sum(r.response_mask) for r in records)
    rewarded = [r for r in records if r.reward is not None]
    per = {
        "assistant_turns": [sum(t.role == "assistant" for t in r.turns) for r in records],
        "tool_calls": [sum(len(t.tool_calls) for t in r.turns if t.role == "tool") for r in records],
        "tool_errors": [
            sum(c.error is not None for t in r.turns if t.role == "tool" for c in t.tool_calls) for r in records
        ],
        "user_turns": [sum(t.role == "user" and t.span[1] > t.span[0] for t in r.turns) for r in records],
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
        "response_tokens": sum(len(r.response_ids) for r in records),
        "wall_s": round(wall_s, 3),
        "generated_tokens_per_s": round(generated / wall_s, 2) if wall_s > 0 else None,
        "trajectories_per_s": round(n / wall_s, 4) if wall_s > 0 else None,
    }


def format_summary(summary: dict[str, Any]) -> str:
    width = max(len(k) for k in summary)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in summary.items())
