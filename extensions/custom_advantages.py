"""Turn-level advantage estimators for stock verl 0.9.1: ``turn_grpo`` and ``gigpo_turn``.

Choose one on ``python -m verl.trainer.main_ppo`` (v1 trainer or legacy; the plugin registers both
through ``core_algos.register_adv_est`` when verl loads it)::

    algorithm.adv_estimator=turn_grpo
    algorithm.adv_estimator=gigpo_turn +algorithm.gigpo_step_weight=0.5   # omega, default 1.0

verl calls a registered estimator as ``fn(token_level_rewards, response_mask, config, index)``
(``ray_trainer.compute_advantage``; the v1 trainer reaches it through
``v1/utils.compute_advantage_for_multi_trajectories``). The per-turn records (each row's
``extras``) come from ``_rows_provider``, which the pack points at its verl seam with
``set_rows_provider``. The pure cores ``turn_level_advantages`` and ``gigpo_advantages`` take
the rows as an argument; call them directly in tests.

Notation, for row i of a group (same ``index``/uid) with assistant turns k = 1..K:
  S_i    = token_level_rewards[i].sum()  (verl's scalar score, plus any per-token KL-in-reward)
  r_k    = the turn's own process reward (``turns[*].reward``: the user score that follows it,
           the tool rewards of its calls, minus format penalties; missing -> 0)
  O_i    = S_i - sum_k r_k               (the outcome: outcome reward, termination penalty, KL)
  R_k    = r_k for k < K,  R_K = r_K + O_i
  G_k    = sum_{j >= k} gamma^(j-k) R_j  (gamma = algorithm.gamma; with gamma = 1, G_1 = S_i)
  norm(x; X) = (x - mean X) / (std X + 1e-6)  with torch.std (unbiased), or x - mean X when
           algorithm.norm_adv_by_std_in_grpo is false; a set of one has mean 0 and std 1 —
           verl's ``compute_grpo_outcome_advantage`` arithmetic, op for op.

turn_grpo (GRPO's group baseline, Shao et al. 2024, "DeepSeekMath", arXiv:2402.03300, applied
per turn to returns built from turn-level rewards as in MT-GRPO, Zeng et al. 2025,
"Reinforcing Multi-Turn Reasoning in LLM Agents via Turn-Level Credit Assignment",
arXiv:2505.11821; rLLM's stepwise advantages broadcast per-step values the same way)::

    A_{i,k} = norm(G_{i,k}; {G_{j,k} : j in the group, j has a k-th assistant turn})
    k = 1 uses every row of the group (a row without turns counts with G = S_i); for k > 1
    with fewer than two rows reaching turn k, A_{i,k} = A_{i,k-1}.
    A_{i,k} goes on the mask-1 tokens of turn k's span; every other token gets 0.

    With one assistant turn per row this is exactly verl's GRPO.

gigpo_turn (Group-in-Group Policy Optimization, Feng et al. 2025, arXiv:2505.10978)::

    A = A^E + omega * A^S
    A^E_i     = verl's GRPO advantage of S_i in the group, on all mask-1 tokens
    A^S_{i,k} = norm(G_{i,k}; {G_{j,l} : same group, turn l of row j has the same anchor})
                on the mask-1 tokens of turn k's span; 0 for an anchor seen once or missing.
    The anchor is a hash of the exact token context before the turn, so every row's first
    turn shares the prompt's anchor and its step group is the episode group.

Rows without usable records (``None``: stock ``tool_agent``/``single_turn_agent`` samples; no
assistant turn; a bad span or reward) fall back to the outcome: their k = 1 advantage (A^E for
gigpo_turn) on all their mask-1 tokens. Each call logs one WARNING with the count and keeps
its statistics in ``LAST_STATS``.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from extensions.errors import ConfigError, choices

logger = logging.getLogger(__name__)

TURN_GRPO = "turn_grpo"
GIGPO_TURN = "gigpo_turn"
STEP_WEIGHT_KEY = "gigpo_step_weight"
EPSILON = 1e-6  # verl's compute_grpo_outcome_advantage default

Rows = Sequence[dict[str, Any] | None]
RowsProvider = Callable[[], "Rows | None"]

LAST_STATS: dict[str, Any] = {}
"""Statistics of the latest call (either estimator): rows, fallback_rows, fallback_reasons, ..."""


def _no_rows() -> Rows | None:
    return None


_rows_provider: RowsProvider = _no_rows


def set_rows_provider(fn: RowsProvider | None) -> RowsProvider:
    """Where the registered estimators get each batch row's ``extras`` (None: no records); returns the previous one."""
    global _rows_provider
    previous, _rows_provider = _rows_provider, (fn if fn is not None else _no_rows)
    return previous


@dataclass(frozen=True)
class AssistantTurn:
    """One assistant turn of a row: its response tokens ``[start, end)``, process reward and anchor."""

    start: int
    end: int
    reward: float
    anchor: str | None


def parse_turns(extras: Any, length: int) -> tuple[list[AssistantTurn] | None, str | None]:
    """A row's assistant turns in order, or ``(None, reason)`` when they cannot be used."""
    if extras is None:
        return None, "no_records"
    turns = extras.get("turns") if isinstance(extras, dict) else None
    if not isinstance(turns, list | tuple):
        return None, "no_records"
    parsed: list[AssistantTurn] = []
    previous_end = 0
    for turn in turns:
        if not isinstance(turn, dict) or turn.get("role") != "assistant":
            continue
        span = turn.get("span")
        if not (isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(p, Integral) for p in span)):
            return None, "bad_span"
        start, end = int(span[0]), int(span[1])
        if not previous_end <= start <= end <= length:
            return None, "bad_span"
        reward = turn.get("reward")
        reward = 0.0 if reward is None else reward
        if isinstance(reward, bool) or not isinstance(reward, Real) or not math.isfinite(reward):
            return None, "bad_reward"
        anchor = turn.get("anchor")
        parsed.append(AssistantTurn(start, end, float(reward), anchor if isinstance(anchor, str) and anchor else None))
        previous_end = end
    if not parsed:
        return None, "no_assistant_turns"
    return parsed, None


def turn_returns(score: float, rewards: Sequence[float], gamma: float) -> list[float]:
    """G_1..G_K from the row's score S and its process rewards r_1..r_K (see the module docstring)."""
    if gamma == 1.0:  # G_k = S - sum_{j<k} r_j: the same sum, and G_1 is S exactly
        returns, prefix = [], 0.0
        for reward in rewards:
            returns.append(score - prefix)
            prefix += reward
        return returns
    per_turn = [*rewards[:-1], score - sum(rewards[:-1])]  # R_K = r_K + O = S - sum_{j<K} r_j
    returns = [0.0] * len(per_turn)
    running = 0.0
    for k in reversed(range(len(per_turn))):
        running = per_turn[k] + gamma * running
        returns[k] = running
    return returns


def _normalise(values: list[torch.Tensor], norm_by_std: bool, epsilon: float) -> list[torch.Tensor]:
    """verl's GRPO arithmetic on one group: same stack/mean/std and the same (x - mean) / (std + eps)."""
    if len(values) == 1:
        mean, std = torch.tensor(0.0), torch.tensor(1.0)
    else:
        stacked = torch.stack(values)
        mean, std = torch.mean(stacked), torch.std(stacked)
    return [(v - mean) / (std + epsilon) if norm_by_std else v - mean for v in values]


@dataclass
class _Prepared:
    scores: torch.Tensor  # (bs,) S_i, summed exactly as verl does
    turns: list[list[AssistantTurn] | None]
    returns: list[torch.Tensor]  # (K_i,) G_{i,k}; (1,) holding S_i for fallback rows
    stats: dict[str, Any]


def _prepare(
    estimator: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | Sequence[Hashable],
    rows: Rows | None,
    gamma: float,
) -> _Prepared:
    batch_size, length = token_level_rewards.shape
    if len(index) != batch_size:
        raise ValueError(f"{estimator}: index has {len(index)} entries for a batch of {batch_size} rows")
    if rows is not None and len(rows) != batch_size:
        raise ValueError(f"{estimator}: the rows provider gave {len(rows)} records for a batch of {batch_size} rows")
    scores = token_level_rewards.sum(dim=-1)
    turns: list[list[AssistantTurn] | None] = []
    returns: list[torch.Tensor] = []
    reasons: Counter[str] = Counter()
    covered = torch.zeros_like(response_mask, dtype=torch.bool)
    for i in range(batch_size):
        parsed, reason = parse_turns(None if rows is None else rows[i], length)
        turns.append(parsed)
        if parsed is None:
            reasons[reason or "no_records"] += 1
            returns.append(scores[i : i + 1])
            covered[i] = True
            continue
        values = turn_returns(scores[i].item(), [t.reward for t in parsed], gamma)
        returns.append(torch.tensor(values, dtype=scores.dtype))
        for turn in parsed:
            covered[i, turn.start : turn.end] = True
    uncovered = int(((response_mask != 0) & ~covered).sum())
    stats = {
        "estimator": estimator,
        "rows": batch_size,
        "fallback_rows": sum(reasons.values()),
        "fallback_reasons": dict(sorted(reasons.items())),
        "assistant_turns": sum(len(t) for t in turns if t is not None),
        "uncovered_mask_tokens": uncovered,
    }
    if reasons:
        logger.warning(
            "%s: %d of %d rows have no usable per-turn records (%s); they use the outcome (GRPO) advantage",
            estimator,
            stats["fallback_rows"],
            batch_size,
            ", ".join(f"{k}: {v}" for k, v in stats["fallback_reasons"].items()),
        )
    if uncovered:
        logger.warning("%s: %d mask-1 tokens lie outside every assistant turn's span; they get 0", estimator, uncovered)
    return _Prepared(scores, turns, returns, stats)


def _publish(stats: dict[str, Any]) -> dict[str, Any]:
    LAST_STATS.clear()
    LAST_STATS.update(stats)
    return stats


def turn_level_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | Sequence[Hashable],
    rows: Rows | None,
    gamma: float = 1.0,
    norm_by_std: bool = True,
    epsilon: float = EPSILON,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """turn_grpo's advantages (bs, L) and the call's statistics; ``rows[i]`` is row i's extras or None."""
    prep = _prepare(TURN_GRPO, token_level_rewards, response_mask, index, rows, gamma)
    batch_size = len(prep.turns)
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i in range(batch_size):
        groups[index[i]].append(i)
    advantages_by_turn: list[list[torch.Tensor]] = [[] for _ in range(batch_size)]
    inherited = 0
    max_turns = max(len(r) for r in prep.returns)
    with torch.no_grad():
        for members in groups.values():
            for k in range(max_turns):
                reaching = [i for i in members if len(prep.returns[i]) > k]
                if k > 0 and len(reaching) < 2:
                    for i in reaching:
                        advantages_by_turn[i].append(advantages_by_turn[i][k - 1])
                    inherited += len(reaching)
                    continue
                normalised = _normalise([prep.returns[i][k] for i in reaching], norm_by_std, epsilon)
                for i, value in zip(reaching, normalised, strict=True):
                    advantages_by_turn[i].append(value)
        advantages = torch.zeros_like(token_level_rewards)
        for i, parsed in enumerate(prep.turns):
            if parsed is None:
                advantages[i] = advantages_by_turn[i][0] * response_mask[i]
                continue
            for turn, value in zip(parsed, advantages_by_turn[i], strict=True):
                advantages[i, turn.start : turn.end] = value * response_mask[i, turn.start : turn.end]
    return advantages, _publish({**prep.stats, "inherited_turns": inherited})


def gigpo_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | Sequence[Hashable],
    rows: Rows | None,
    gamma: float = 1.0,
    norm_by_std: bool = True,
    step_weight: float = 1.0,
    epsilon: float = EPSILON,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """gigpo_turn's advantages (bs, L) = verl's GRPO + step_weight * the anchor-group term, and statistics."""
    prep = _prepare(GIGPO_TURN, token_level_rewards, response_mask, index, rows, gamma)
    episode, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=np.asarray(index, dtype=object),
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_by_std,
    )
    anchor_groups: dict[tuple[Hashable, str], list[tuple[int, int, AssistantTurn]]] = defaultdict(list)
    for i, parsed in enumerate(prep.turns):
        for k, turn in enumerate(parsed or []):
            if turn.anchor is not None:
                anchor_groups[(index[i], turn.anchor)].append((i, k, turn))
    step = torch.zeros_like(token_level_rewards)
    step_groups = step_turns = 0
    with torch.no_grad():
        for members in anchor_groups.values():
            if len(members) < 2:
                continue
            step_groups += 1
            step_turns += len(members)
            normalised = _normalise([prep.returns[i][k] for i, k, _ in members], norm_by_std, epsilon)
            for (i, _, turn), value in zip(members, normalised, strict=True):
                step[i, turn.start : turn.end] = value * response_mask[i, turn.start : turn.end]
        advantages = episode + step_weight * step
    stats = {**prep.stats, "step_groups": step_groups, "step_turns": step_turns, "step_weight": step_weight}
    return advantages, _publish(stats)


def _setting(config: Any, key: str, default: Any) -> Any:
    return default if config is None else config.get(key, default)


def _uids(estimator: str, index: np.ndarray | None) -> np.ndarray:
    if index is None:
        raise ValueError(
            f"{estimator} groups rows by prompt and needs the batch's 'uid' column (verl passes it as index); "
            "this batch has none"
        )
    return index


def step_weight_from(config: Any) -> float:
    """omega of gigpo_turn: ``algorithm.gigpo_step_weight`` (add it with ``+algorithm.gigpo_step_weight=``)."""
    value = _setting(config, STEP_WEIGHT_KEY, 1.0)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"algorithm.{STEP_WEIGHT_KEY} must be a number, got {value!r}") from None


def compute_turn_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``turn_grpo``: (advantages, returns), both the turn-level advantages."""
    advantages, _stats = turn_level_advantages(
        token_level_rewards,
        response_mask,
        _uids(TURN_GRPO, index),
        _rows_provider(),
        gamma=float(_setting(config, "gamma", 1.0)),
        norm_by_std=bool(_setting(config, "norm_adv_by_std_in_grpo", True)),
    )
    return advantages, advantages


def compute_gigpo_turn_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``gigpo_turn``: (advantages, returns), both episode + omega * step advantages."""
    advantages, _stats = gigpo_advantages(
        token_level_rewards,
        response_mask,
        _uids(GIGPO_TURN, index),
        _rows_provider(),
        gamma=float(_setting(config, "gamma", 1.0)),
        norm_by_std=bool(_setting(config, "norm_adv_by_std_in_grpo", True)),
        step_weight=step_weight_from(config),
    )
    return advantages, advantages


ESTIMATORS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    TURN_GRPO: compute_turn_grpo_advantage,
    GIGPO_TURN: compute_gigpo_turn_advantage,
}


def register_estimators() -> list[str]:
    """Register the pack's estimators with verl (idempotent); returns their names."""
    for name, fn in ESTIMATORS.items():
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)  # raises if another function holds the name
    return sorted(ESTIMATORS)


def check_estimator_name(name: str | Enum) -> None:
    """Fail early, listing verl's registered estimators; verl itself fails at the first advantage step
    with ``Unknown advantage estimator simply: <name>`` and no list."""
    key = name.value if isinstance(name, Enum) else name
    if key not in core_algos.ADV_ESTIMATOR_REGISTRY:
        raise ConfigError(
            f"algorithm.adv_estimator={key!r} is not a registered advantage estimator; "
            f"choose one of: {choices(core_algos.ADV_ESTIMATOR_REGISTRY)}"
        )
