"""The arithmetic of the turn-level estimators (``extensions/custom_advantages.py`` registers them).

Pure functions of tensors and per-row records, no verl state: ``parse_turns`` (a row's assistant
turns), ``turn_returns`` (G_1..G_K), ``turn_level_advantages`` (``turn_grpo`` and the older
``turn_grpo_per_index``), ``gigpo_advantages`` (``gigpo_turn``). The formulas and their sources are
in ``custom_advantages``'s docstring; ``tests/test_turn_credit_bias.py`` checks the bias claims.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from extensions.errors import SampleError

logger = logging.getLogger(__name__)

EPSILON = 1e-6  # verl's compute_grpo_outcome_advantage default
TURN_GRPO = "turn_grpo"
GIGPO_TURN = "gigpo_turn"
Rows = Sequence[dict[str, Any] | None]

LAST_STATS: dict[str, Any] = {}
"""Statistics of the latest call (either estimator): rows, fallback_rows, fallback_reasons, ..."""


@dataclass(frozen=True)
class AssistantTurn:
    """One assistant step of a row (a turn, or part of one: ``parse_turns``): its response tokens
    ``[start, end)``, process reward and anchor."""

    start: int
    end: int
    reward: float
    anchor: str | None


def parse_turns(extras: Any, length: int) -> tuple[list[AssistantTurn] | None, str | None]:
    """A row's assistant steps in order, or ``(None, reason)`` when they cannot be used.

    A step is what the policy generates between two observations: an assistant turn, or, where code
    blocks ran inside the turn (``code_calls``), each stretch up to a block's output and the stretch
    after the last one (``_steps``).
    """
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
        span = _span(turn.get("span"))
        if span is None or not previous_end <= span[0] <= span[1] <= length:
            return None, "bad_span"
        reward = turn.get("reward")
        reward = 0.0 if reward is None else reward
        _check_finite(reward, f"assistant turn {len(parsed)}'s reward")
        if not _is_number(reward):
            return None, "bad_reward"
        anchor = turn.get("anchor")
        steps, reason = _steps(turn, span, float(reward), anchor if isinstance(anchor, str) and anchor else None)
        if steps is None:
            return None, reason
        parsed.extend(steps)
        previous_end = span[1]
    if not parsed:
        return None, "no_assistant_turns"
    return parsed, None


def _steps(
    turn: dict[str, Any], span: tuple[int, int], reward: float, anchor: str | None
) -> tuple[list[AssistantTurn] | None, str | None]:
    """An assistant turn cut at its inline code outputs: C calls give C + 1 steps, step j < C ending
    where call j's output starts, step j > 0 starting where call j-1's output ends (with that call's
    ``anchor``). Rewards: ``step_rewards`` when it has C + 1 numbers, else the turn's on its last step."""
    calls = turn.get("code_calls") or []
    if not calls:
        return [AssistantTurn(span[0], span[1], reward, anchor)], None
    bounds, anchors = [span[0]], [anchor]
    for call in calls:
        call_span = _span(call.get("span")) if isinstance(call, dict) else None
        if call_span is None or not bounds[-1] <= call_span[0] <= call_span[1] <= span[1]:
            return None, "bad_span"
        call_anchor = call.get("anchor")
        bounds += list(call_span)
        anchors.append(call_anchor if isinstance(call_anchor, str) and call_anchor else None)
    bounds.append(span[1])
    rewards = turn.get("step_rewards")
    for j, value in enumerate(rewards if isinstance(rewards, list | tuple) else []):
        _check_finite(value, f"step_rewards[{j}]")
    if rewards is None:
        rewards = [0.0] * len(calls) + [reward]
    elif not (isinstance(rewards, list | tuple) and len(rewards) == len(calls) + 1 and all(map(_is_number, rewards))):
        return None, "bad_reward"
    starts, ends = bounds[0::2], bounds[1::2]
    return [AssistantTurn(*step) for step in zip(starts, ends, map(float, rewards), anchors, strict=True)], None


def _span(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(p, Integral) for p in value):
        return int(value[0]), int(value[1])
    return None


def _check_finite(value: Any, what: str) -> None:
    """A number that is NaN or inf is an error, never a silent fallback (one NaN poisons a GRPO group)."""
    if isinstance(value, Real) and not isinstance(value, bool) and not math.isfinite(value):
        raise SampleError(f"{what} is {value!r}; process rewards must be finite numbers")


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)


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
    bad = (~torch.isfinite(scores)).nonzero().flatten().tolist()
    if bad:
        named = ", ".join(f"row {i} (uid {index[i]})" for i in bad[:5])
        raise SampleError(f"{estimator}: the score of {len(bad)} of {batch_size} rows is not finite: {named}")
    turns: list[list[AssistantTurn] | None] = []
    returns: list[torch.Tensor] = []
    reasons: Counter[str] = Counter()
    covered = torch.zeros_like(response_mask, dtype=torch.bool)
    for i in range(batch_size):
        try:
            parsed, reason = parse_turns(None if rows is None else rows[i], length)
        except SampleError as exc:
            raise SampleError(f"{estimator}: row {i} (uid {index[i]}): {exc}") from None
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
    per_index: bool = False,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """turn_grpo's advantages (bs, L) and the call's statistics; ``rows[i]`` is row i's extras or None.

    ``per_index=True`` is the older, biased construction (``turn_grpo_per_index``, module docstring).
    """
    prep = _prepare(TURN_GRPO, token_level_rewards, response_mask, index, rows, gamma)
    batch_size = len(prep.turns)
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i in range(batch_size):
        groups[index[i]].append(i)
    advantages_by_turn: list[list[torch.Tensor]] = [[] for _ in range(batch_size)]
    with torch.no_grad():
        group_turns = _per_index_turns if per_index else _group_baseline_turns
        fallback = frozenset(i for i, parsed in enumerate(prep.turns) if parsed is None)
        inherited = sum(
            group_turns(members, prep.returns, advantages_by_turn, norm_by_std, epsilon, fallback)
            for members in groups.values()
        )
        advantages = torch.zeros_like(token_level_rewards)
        for i, parsed in enumerate(prep.turns):
            if parsed is None:
                advantages[i] = advantages_by_turn[i][0] * response_mask[i]
                continue
            for turn, value in zip(parsed, advantages_by_turn[i], strict=True):
                advantages[i, turn.start : turn.end] = value * response_mask[i, turn.start : turn.end]
    return advantages, _publish({**prep.stats, "inherited_turns": inherited})


def _group_baseline_turns(
    members: list[int],
    returns: list[torch.Tensor],
    out: list[list[torch.Tensor]],
    norm_by_std: bool,
    epsilon: float,
    fallback: frozenset[int] = frozenset(),
) -> int:
    """turn_grpo: turn 1 is verl's GRPO; turn k > 1 gets (G_k - sum of the group's G_k / N) / (sigma + eps),
    rows that ended before turn k adding 0 to the sum, sigma the std of the group's zero-padded returns of
    every turn (module docstring). Fallback rows (no usable records) take part in turn 1 only: their later
    turns are unknown, so they are not in N or sigma. Returns 0 (nothing inherited)."""
    first = [returns[i][0] for i in members]
    for i, value in zip(members, _normalise(first, norm_by_std, epsilon), strict=True):
        out[i].append(value)
    credited = [i for i in members if i not in fallback]
    if not credited:
        return 0
    n, turns = len(credited), max(len(returns[i]) for i in credited)
    padded = torch.zeros(n, turns, dtype=first[0].dtype)
    for row, i in enumerate(credited):
        padded[row, : len(returns[i])] = returns[i]
    std = torch.std(padded) if n > 1 else torch.tensor(1.0)
    for k in range(1, turns):
        reaching = [i for i in credited if len(returns[i]) > k]
        baseline = torch.stack([returns[i][k] for i in reaching]).sum() / n if n > 1 else torch.tensor(0.0)
        for i in reaching:
            centred = returns[i][k] - baseline
            out[i].append(centred / (std + epsilon) if norm_by_std else centred)
    return 0


def _per_index_turns(
    members: list[int],
    returns: list[torch.Tensor],
    out: list[list[torch.Tensor]],
    norm_by_std: bool,
    epsilon: float,
    fallback: frozenset[int] = frozenset(),
) -> int:
    """turn_grpo_per_index: G_k normalised among the rows that reached turn k (biased; module docstring).
    Fallback rows hold one return, so they never reach turn k > 1."""
    inherited = 0
    for k in range(max(len(returns[i]) for i in members)):
        reaching = [i for i in members if len(returns[i]) > k]
        if k > 0 and len(reaching) < 2:
            for i in reaching:
                out[i].append(out[i][k - 1])
            inherited += len(reaching)
            continue
        for i, value in zip(reaching, _normalise([returns[i][k] for i in reaching], norm_by_std, epsilon), strict=True):
            out[i].append(value)
    return inherited


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
