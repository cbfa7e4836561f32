"""The reward's settings: ``reward.custom_reward_function.reward_kwargs`` in verl's config.

verl 0.9.1 merges these kwargs into every call (``verl/trainer/ppo/reward.py``,
``get_custom_reward_fn``), so they arrive next to data_source/solution_str/... A key that is
not a field here is a ``ConfigError`` naming it and the valid keys, so a typo such as
``w_turns`` fails the first reward call instead of silently using a default.

    +reward.custom_reward_function.reward_kwargs.w_turn=0.2   # '+': verl's YAML lacks the key
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from extensions.errors import ConfigError, choices
from extensions.rewards.gsm8k import Mode

# Keyword arguments verl itself adds when a reward model router is configured (naive.py).
VERL_REWARD_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})


class RewardSettings(BaseModel):
    """Weights of ``score = w_outcome*outcome + w_turn*mean(turn_scores) + w_tool*mean(tool_rewards)
    + min(w_exec*successful_calls, exec_bonus_cap) - w_format*num_malformed_tool_calls - termination
    penalty``. The defaults give the plain outcome reward; every shaping term is opt-in.

    For an agent that should use its tools, leave ``w_format`` at 0 (a malformed call is answered
    with what was wrong, never charged) and pay a small ``w_exec``: its cap must stay below
    ``w_outcome``, so a wrong answer with tools never outscores a right one without."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    mode: Mode = "strict"
    """GSM8K extraction: 'strict' needs a ``#### N`` line, 'flexible' takes the last number."""
    w_outcome: float = 1.0
    """Weight of the outcome (1 if the final answer is right, else 0; 0 for an ``error`` trajectory)."""
    w_turn: float = 0.0
    """Weight of the mean of ``turn_scores`` (0 when there are none)."""
    w_tool: float = 0.0
    """Weight of the mean of ``tool_rewards`` (0 when there are none)."""
    w_exec: float = 0.0
    """Bonus per tool call that ran without error (``python_exec``: exit status 0, in time)."""
    exec_bonus_cap: float = 0.0
    """Most the execution bonus adds to one trajectory; must be below ``w_outcome`` when ``w_exec`` > 0."""
    exec_bonus_if_correct: bool = False
    """Pay the execution bonus only to a right answer (then calls alone never earn anything)."""
    w_format: float = 0.0
    """Penalty per malformed tool call (discouraged: it teaches a policy to stop calling tools)."""
    error_penalty: float = 0.0
    """Subtracted when the trajectory ended with reason ``error``."""
    budget_penalty: float = 0.0
    """Subtracted when the trajectory ended with reason ``response_budget``, ``repeat_loop`` (a loop that a bound cut
    short costs what one that ran out costs) or, folding, ``max_segments``."""

    @model_validator(mode="after")
    def _bonus_below_outcome(self) -> RewardSettings:
        if self.w_exec < 0 or self.exec_bonus_cap < 0:
            raise ValueError(f"w_exec and exec_bonus_cap must be >= 0, got {self.w_exec} and {self.exec_bonus_cap}")
        if self.w_exec > 0 and not 0 < self.exec_bonus_cap < self.w_outcome:
            raise ValueError(
                f"exec_bonus_cap={self.exec_bonus_cap} must be in (0, w_outcome={self.w_outcome}) when w_exec > 0, "
                "so that a wrong answer with tools never outscores a right one without"
            )
        return self


def parse_reward_kwargs(kwargs: dict[str, Any]) -> RewardSettings:
    """Validate ``reward_kwargs`` (minus verl's own extras); cached, since it runs once per sample."""
    ours = {key: value for key, value in kwargs.items() if key not in VERL_REWARD_KWARGS}
    frozen = tuple(sorted(ours.items()))
    try:
        hash(frozen)
    except TypeError:  # a list or dict value: invalid anyway, let pydantic say why
        return _parse(ours)
    return _parse_cached(frozen)


@lru_cache(maxsize=32)
def _parse_cached(frozen: tuple[tuple[str, Any], ...]) -> RewardSettings:
    return _parse(dict(frozen))


def _parse(kwargs: dict[str, Any]) -> RewardSettings:
    try:
        return RewardSettings(**kwargs)
    except ValidationError as exc:
        raise _settings_error(exc) from None


def _settings_error(exc: ValidationError) -> ConfigError:
    valid = choices(RewardSettings.model_fields)
    lines = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "(settings)"
        if err["type"] == "extra_forbidden":
            lines.append(f"reward_kwargs: unknown key {key!r}; valid keys: {valid}")
        else:
            lines.append(f"reward_kwargs: key {key!r}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError("\n".join(lines))
