"""Turn-level advantage estimators for stock verl 0.9.1: ``turn_grpo`` and ``gigpo_turn``.

Choose one on ``python -m verl.trainer.main_ppo`` (v1 trainer or legacy; the plugin registers both
through ``core_algos.register_adv_est`` when verl loads it)::

    algorithm.adv_estimator=turn_grpo
    algorithm.adv_estimator=turn_grpo_per_index                        # the older, biased construction
    algorithm.adv_estimator=gigpo_turn +algorithm.gigpo_step_weight=0.5   # omega, default 1.0

verl calls a registered estimator as ``fn(token_level_rewards, response_mask, config, index)``
(``ray_trainer.compute_advantage``; the v1 trainer reaches it through
``v1/utils.compute_advantage_for_multi_trajectories``). The per-turn records (each row's
``extras``) come from ``_rows_provider``, which the pack points at its verl seam with
``set_rows_provider``. The pure cores ``turn_level_advantages`` and ``gigpo_advantages`` take
the rows as an argument; call them directly in tests.

Notation, for row i of a group (same ``index``/uid) with assistant steps k = 1..K — a step is what
the policy writes between two observations: an assistant turn, or, where code blocks ran inside the
turn (code-fence format), each stretch up to a block's output and the stretch after the last
(``turn_credit.parse_turns``); "turn" below means step:
  S_i    = token_level_rewards[i].sum()  (verl's scalar score, plus any per-token KL-in-reward)
  r_k    = the step's own process reward (``turns[*].reward`` / ``step_rewards``: the user score that
           follows it, the tool rewards and execution bonus of its calls, minus format penalties;
           extensions/rewards/turns.py; missing -> 0)
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

    A_{i,1} = norm(S_i; {S_j : j in the group})                       (verl's GRPO, op for op)
    A_{i,k} = (G_{i,k} - (1/N) sum_{j reaching turn k} G_{j,k}) / (sigma + eps),  k > 1
    N is the group size less its fallback rows (below: their later turns are unknown, so they take part
    in turn 1's GRPO only); a row that ended before turn k adds 0 to the sum; sigma is one scale per
    group: the std of all its returns, every row's G_{j,1..K} zero-padded to the longest row's K
    (1 for a group of one; no division when norm_adv_by_std_in_grpo is false). Not GRPO's std of S:
    in a group whose rows all scored the same (std 0), the later turns' centred returns are not 0
    (process rewards, rows that stopped earlier), and dividing them by eps gave advantages of 1e5
    on the first GPU run (docs/results/turn-credit-ab-h100/).
    A_{i,k} goes on the mask-1 tokens of turn k's span; every other token gets 0.

    Why not normalise G_k among the rows that reached turn k (MT-GRPO's construction, kept as
    ``turn_grpo_per_index``)? Whether a row reaches turn k is the row's own decision, so the
    row's share of that baseline (1/n_k) and the per-turn std vary with its stopping behaviour:
    the expected update is no longer the policy gradient (verl RFC #7244). Here every turn's
    baseline gives the row the same share 1/N and every turn the same scale, so without std
    normalisation the expected update is exactly (1 - 1/N) x the policy gradient — GRPO's own
    factor — whatever the policy's stopping rule (``tests/test_turn_credit_bias.py`` enumerates a
    two-decision agent: 0.75 x the gradient on both decisions for N = 4; per-index: 0.75 and 0.64).
    With std normalisation the scale is data-dependent, as it is for verl's GRPO; the test checks
    that the direction stays closer to the gradient's than per-index normalisation's.

    With one assistant turn per row both are exactly verl's GRPO.

turn_grpo_per_index (the older construction; biased under policy-controlled termination)::

    A_{i,k} = norm(G_{i,k}; {G_{j,k} : j in the group, j has a k-th assistant turn})
    k = 1 uses every row of the group; for k > 1 with fewer than two rows reaching turn k,
    A_{i,k} = A_{i,k-1}.

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
from collections.abc import Callable
from enum import Enum
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from extensions.errors import ConfigError, choices
from extensions.turn_credit import (  # noqa: F401  (the pure cores, also reached as custom_advantages.X)
    EPSILON,
    GIGPO_TURN,
    LAST_STATS,
    TURN_GRPO,
    AssistantTurn,
    Rows,
    gigpo_advantages,
    parse_turns,
    turn_level_advantages,
    turn_returns,
)

logger = logging.getLogger(__name__)

TURN_GRPO_PER_INDEX = "turn_grpo_per_index"
STEP_WEIGHT_KEY = "gigpo_step_weight"

RowsProvider = Callable[[], "Rows | None"]


def _no_rows() -> Rows | None:
    return None


_rows_provider: RowsProvider = _no_rows


def set_rows_provider(fn: RowsProvider | None) -> RowsProvider:
    """Where the registered estimators get each batch row's ``extras`` (None: no records); returns the previous one."""
    global _rows_provider
    previous, _rows_provider = _rows_provider, (fn if fn is not None else _no_rows)
    return previous


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
    """omega of ``gigpo_turn``, whose advantage is the episode's GRPO advantage plus omega times the step-group
    advantage (``A = A^E + omega * A^S``)."""
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
    per_index: bool = False,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``turn_grpo``: (advantages, returns), both the turn-level advantages."""
    advantages, _stats = turn_level_advantages(
        token_level_rewards,
        response_mask,
        _uids(TURN_GRPO_PER_INDEX if per_index else TURN_GRPO, index),
        _rows_provider(),
        gamma=float(_setting(config, "gamma", 1.0)),
        norm_by_std=bool(_setting(config, "norm_adv_by_std_in_grpo", True)),
        per_index=per_index,
    )
    return advantages, advantages


def compute_turn_grpo_per_index_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator ``turn_grpo_per_index``: the older, biased per-turn-index normalisation."""
    return compute_turn_grpo_advantage(token_level_rewards, response_mask, index, config, per_index=True)


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
    TURN_GRPO_PER_INDEX: compute_turn_grpo_per_index_advantage,
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
