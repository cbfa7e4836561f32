"""Per-assistant-turn process rewards: the reward's shaping terms, split over the turns that earned them.

``compute_score`` (extensions/custom_rewards.py) folds a trajectory into one scalar

    score = w_outcome*outcome + w_turn*mean(turn_scores) + w_tool*mean(tool_rewards)
            - w_format*num_malformed_tool_calls - termination_penalty

The loop splits the three shaping terms over its assistant turns — a user score goes to the
assistant turn it answers, a tool reward to the turn that made the call (a code block run inside
a turn: that turn), a malformed call's penalty to the turn that wrote it — so that for assistant
turns k = 1..K

    r_k = w_turn*sum(scores after k)/N_scores + w_tool*sum(rewards of k's calls)/N_tool_rewards
          - w_format*(malformed calls in k)

and sum_k r_k + w_outcome*outcome - termination_penalty == score exactly. Each r_k is written to
its assistant record as ``reward``; the turn-level estimators (extensions/custom_advantages.py)
take the rest of the score (score - sum r_k) as the outcome.

The weights are the run's own reward settings (``reward.custom_reward_function.reward_kwargs``),
read only when the run's reward function is this pack's ``compute_score``; with another reward
function no ``reward`` is recorded and the estimators treat every r_k as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extensions.rewards.settings import RewardSettings, parse_reward_kwargs

PACK_REWARD_PATHS = ("pkg://extensions.custom_rewards", "extensions/custom_rewards.py", "extensions.custom_rewards")


def settings_from_trainer_config(config: Any) -> RewardSettings | None:
    """The reward settings of a verl trainer config whose reward function is the pack's, else None."""
    reward_fn = ((config.get("reward") or {}).get("custom_reward_function")) or {}
    path = str(reward_fn.get("path") or "")
    if not path.endswith(PACK_REWARD_PATHS) or reward_fn.get("name", "compute_score") != "compute_score":
        return None
    return parse_reward_kwargs(dict(reward_fn.get("reward_kwargs") or {}))


def turn_rewards(turns: Sequence[Mapping[str, Any]], settings: RewardSettings) -> list[float]:
    """r_k for each assistant turn of ``turns`` (the loop's records, in order)."""
    scores = [float(t["score"]) for t in turns if t["role"] == "user" and t.get("score") is not None]
    tool_rewards = [float(call["reward"]) for t in turns for call in _calls(t) if call.get("reward") is not None]
    rewards: list[float] = []
    for turn in turns:
        if turn["role"] == "assistant":
            rewards.append(-settings.w_format * len(turn.get("malformed_tool_calls") or []))
            earned = [float(c["reward"]) for c in turn.get("code_calls") or [] if c.get("reward") is not None]
            rewards[-1] += settings.w_tool * sum(earned) / len(tool_rewards) if earned else 0.0
        elif not rewards:
            continue
        elif turn["role"] == "user" and turn.get("score") is not None:
            rewards[-1] += settings.w_turn * float(turn["score"]) / len(scores)
        elif turn["role"] == "tool":
            earned = [float(c["reward"]) for c in turn.get("tool_calls") or [] if c.get("reward") is not None]
            rewards[-1] += settings.w_tool * sum(earned) / len(tool_rewards) if earned else 0.0
    return rewards


def _calls(turn: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The calls a turn ran: a tool round's, or the code blocks run inside an assistant turn."""
    return list(turn.get("tool_calls") or []) if turn["role"] == "tool" else list(turn.get("code_calls") or [])
