"""Per-assistant-turn process rewards: the reward's shaping terms, split over the turns that earned them.

``compute_score`` (extensions/custom_rewards.py) folds a trajectory into one scalar

    score = w_outcome*outcome + w_turn*mean(turn_scores) + w_tool*mean(tool_rewards) + exec_bonus
            - w_format*num_malformed_tool_calls - termination_penalty

The loop splits the shaping terms over its assistant turns — a user score goes to the
assistant turn it answers, a tool reward to the turn that made the call (a code block run inside
a turn: that turn), a malformed call's penalty to the turn that wrote it — so that for assistant
turns k = 1..K

    r_k = w_turn*sum(scores after k)/N_scores + w_tool*sum(rewards of k's calls)/N_tool_rewards
          + exec_bonus earned by k's calls - w_format*(malformed calls in k)

and sum_k r_k + w_outcome*outcome - termination_penalty == score exactly. The execution bonus
``min(w_exec*successful_calls, exec_bonus_cap)`` is paid call by call: each successful call earns
``w_exec`` (the call that reaches the cap, what is left of it) for the turn that made it — unless
``exec_bonus_if_correct``, which makes it depend on the outcome and so part of it.

A turn in which code blocks ran (code-fence format) is several steps: the tokens up to each block's
output, then the rest. Step j < C earns block j's reward, the last step the rest; a turn's steps
are written to its record as ``step_rewards`` and their sum as ``reward``. The turn-level
estimators (extensions/custom_advantages.py) credit each step and take the rest of the score
(score - sum r_k) as the outcome.

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
    """r_k for each assistant turn of ``turns`` (the loop's records, in order): the sum of its steps'."""
    return [sum(steps) for steps in step_rewards(turns, settings)]


def step_rewards(turns: Sequence[Mapping[str, Any]], settings: RewardSettings) -> list[list[float]]:
    """Each assistant turn's process reward split over its steps (module docstring).

    An assistant turn with C code blocks run inside it has C + 1 steps: step j < C ends with block j
    and earns that call's reward (tool reward, execution bonus); the last step earns the rest (user
    score, the tool round after it, format penalties). A turn without inline blocks is one step.
    """
    scores = [float(t["score"]) for t in turns if t["role"] == "user" and t.get("score") is not None]
    tool_rewards = [float(call["reward"]) for t in turns for call in _calls(t) if call.get("reward") is not None]
    bonus = _ExecBonus(settings)
    rewards: list[list[float]] = []
    for turn in turns:
        if turn["role"] == "assistant":
            steps = [_call_reward(call, settings, len(tool_rewards), bonus) for call in turn.get("code_calls") or []]
            rewards.append([*steps, -settings.w_format * len(turn.get("malformed_tool_calls") or [])])
        elif not rewards:
            continue
        elif turn["role"] == "user" and turn.get("score") is not None:
            rewards[-1][-1] += settings.w_turn * float(turn["score"]) / len(scores)
        elif turn["role"] == "tool":
            rewards[-1][-1] += sum(
                _call_reward(c, settings, len(tool_rewards), bonus) for c in turn.get("tool_calls") or []
            )
    return rewards


class _ExecBonus:
    """The execution bonus paid call by call, in trajectory order, until ``exec_bonus_cap``.

    Only when it is a process reward: with ``exec_bonus_if_correct`` it depends on the outcome, so it
    stays in the outcome part of the score (score - sum of the steps' rewards)."""

    def __init__(self, settings: RewardSettings) -> None:
        self.w = 0.0 if settings.exec_bonus_if_correct else settings.w_exec
        self.left = settings.exec_bonus_cap

    def pay(self, call: Mapping[str, Any]) -> float:
        if not (self.w and call.get("succeeded")):
            return 0.0
        paid = min(self.w, self.left)
        self.left -= paid
        return paid


def _call_reward(call: Mapping[str, Any], settings: RewardSettings, num_tool_rewards: int, bonus: _ExecBonus) -> float:
    reward = settings.w_tool * float(call["reward"]) / num_tool_rewards if call.get("reward") is not None else 0.0
    return reward + bonus.pay(call)


def _calls(turn: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The calls a turn ran: a tool round's, or the code blocks run inside an assistant turn."""
    return list(turn.get("tool_calls") or []) if turn["role"] == "tool" else list(turn.get("code_calls") or [])
