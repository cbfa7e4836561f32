"""Loss weights of the segments of folded trajectories (``folding_loop.py``), applied to the advantages.

verl 0.9.1's v1 trainer keys each training row ``{uid}_{session}_{i}``: a trajectory folded into N
segments is N rows (each segment's ``extras`` says ``num_segments``). With a per-row loss mean (``actor.loss_agg_mode`` ``seq-mean-*``) it would weigh N
times as much as an unfolded one (verl PR #7580); with ``token-mean`` each token counts once, and a
folded trajectory still weighs as many tokens as all its segments hold. ``algorithm.segment_weight``:

    inverse_count (default)  every row of an N-segment trajectory gets 1/N: a folded trajectory weighs
                             one row (seq-mean) or its tokens / N (token-mean), never N rows
    none                     every row 1 (verl's behaviour)

The weight multiplies the row's advantages after verl computed them. The PPO policy loss is linear in
the advantage for a positive factor (``min(r*A, clip(r)*A)`` scales with it), so this is exactly a
per-row loss weight on the policy-gradient term; entropy and KL terms are left as they are.
Unfolded rows (one segment) always get 1, so a batch without folding is untouched bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from extensions.errors import ConfigError, choices

SETTING = "segment_weight"
MODES = ("inverse_count", "none")


def segment_weight_mode(config: Any) -> str:
    """How the N segments of a folded trajectory are weighted: ``inverse_count`` gives each row 1/N (a folded
    trajectory weighs one row), ``none`` gives each 1 (verl's behaviour)."""
    value = "inverse_count" if config is None else config.get(SETTING, "inverse_count")
    if value not in MODES:
        raise ConfigError(f"algorithm.{SETTING}={value!r} is not valid; choose one of {choices(MODES)}")
    return str(value)


def check_segment_estimator(config: Any, *, folding: bool = True) -> None:
    """Folded trajectories train with GRPO only: verl takes a trajectory's advantage from its last segment
    for GRPO alone (``compute_advantage_for_multi_trajectories``); any other estimator would group the
    segments as if they were separate samples of the prompt. Also checks ``segment_weight``."""
    segment_weight_mode(config)
    if config is None:
        return
    estimator = str(getattr(config.get("adv_estimator"), "value", config.get("adv_estimator")))
    if folding and estimator != "grpo":
        raise ConfigError(
            f"algorithm.adv_estimator={estimator!r} cannot train folded trajectories (a folding loop such as "
            "folding_workflow): verl 0.9.1 gives a trajectory's segments its last segment's advantage for grpo "
            "only, and any other estimator would treat the segments as separate samples; use "
            "algorithm.adv_estimator=grpo"
        )


def segment_weights(rows: Sequence[Mapping[str, Any] | None], mode: str) -> torch.Tensor:
    """(rows,) weights: 1/N for each segment of a trajectory folded into N (``inverse_count``), else 1.

    A row is a segment when its ``extras`` says ``num_segments`` (``folding_loop.py``); every other row
    (no records, other loops, other multi-output loops) keeps 1."""
    weights = [1.0] * len(rows)
    if mode == "inverse_count":
        for i, row in enumerate(rows):
            n = row.get("num_segments") if row is not None else None
            if isinstance(n, int) and n > 1:
                weights[i] = 1.0 / n
    return torch.tensor(weights)


def weigh_advantages(data: Any, rows: Sequence[Mapping[str, Any] | None] | None, config: Any) -> None:
    """Scale ``data.batch["advantages"]`` and ``returns`` row by row (nothing to do without segments)."""
    if rows is None:
        return
    if any(row is not None and (row.get("num_segments") or 1) > 1 for row in rows):
        check_segment_estimator(config)
    weights = segment_weights(rows, segment_weight_mode(config))
    if bool((weights < 1).any()):
        scale = weights.to(data.batch["advantages"].dtype).unsqueeze(-1)
        data.batch["advantages"] = data.batch["advantages"] * scale
        if "returns" in data.batch:
            data.batch["returns"] = data.batch["returns"] * scale
