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
from numbers import Real
from typing import Any

import torch

from extensions.errors import ConfigError, SampleError, choices

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


def segment_count(row: Mapping[str, Any] | None, *, row_index: int | None = None) -> int:
    """How many segments the row's trajectory was folded into: ``extras["num_segments"]``, 1 without it.

    The one reader of the count (weights, the estimator check, metrics): ``3``, ``numpy.int64(3)`` and ``3.0``
    all read 3; a bool, a fraction, a non-number or a count below 1 is a ``SampleError`` naming the row."""
    value = None if row is None else row.get("num_segments")
    if value is None:
        return 1
    where = "a row" if row_index is None else f"row {row_index}"
    if isinstance(value, bool) or not isinstance(value, Real) or value != int(value) or value < 1:
        raise SampleError(
            f"{where}: extras.num_segments must be a whole number >= 1 (the folding loop writes it), got {value!r}"
        )
    return int(value)


def is_last_segment(row: Mapping[str, Any], *, row_index: int | None = None) -> bool:
    """Whether the row ends its trajectory: ``extras["segment"]`` is ``num_segments - 1`` (an unfolded row: True).

    The index is read as ``segment_count`` reads the count (``2``, ``numpy.int64(2)``, ``2.0``)."""
    count = segment_count(row, row_index=row_index)
    index = row.get("segment")
    if index is None:
        return True
    if isinstance(index, bool) or not isinstance(index, Real) or index != int(index) or not 0 <= index < count:
        where = "a row" if row_index is None else f"row {row_index}"
        raise SampleError(f"{where}: extras.segment must be a whole number in [0, {count}), got {index!r}")
    return int(index) == count - 1


def segment_weights(rows: Sequence[Mapping[str, Any] | None], mode: str) -> torch.Tensor:
    """(rows,) weights: 1/N for each segment of a trajectory folded into N (``inverse_count``), else 1.

    A row is a segment when its ``extras`` says ``num_segments`` (``folding_loop.py``); every other row
    (no records, other loops, other multi-output loops) keeps 1."""
    counts = [segment_count(row, row_index=i) for i, row in enumerate(rows)]
    if mode != "inverse_count":
        return torch.ones(len(rows))
    return torch.tensor([1.0 / n for n in counts])


def weigh_advantages(data: Any, rows: Sequence[Mapping[str, Any] | None] | None, config: Any) -> None:
    """Scale ``data.batch["advantages"]`` and ``returns`` row by row.

    ``rows`` is each row's ``extras`` (None for a row without records); ``rows=None`` means the seam could not
    tell, which is an error: without the rows a folded trajectory would weigh N times (module docstring)."""
    if rows is None:
        raise RuntimeError(
            "segment weights: no per-row records for this batch, so folded trajectories cannot be weighed; "
            "the step stops rather than weigh an N-segment trajectory N times. The verl seam reads them "
            "(extensions/verl_compat/trainer_hooks.py); run `pytest tests/test_verl_compat.py tests/test_folding_v1.py`"
        )
    counts = [segment_count(row, row_index=i) for i, row in enumerate(rows)]
    if any(n > 1 for n in counts):
        check_segment_estimator(config)
    weights = segment_weights(rows, segment_weight_mode(config))
    if bool((weights < 1).any()):
        scale = weights.to(data.batch["advantages"].dtype).unsqueeze(-1)
        data.batch["advantages"] = data.batch["advantages"] * scale
        if "returns" in data.batch:
            data.batch["returns"] = data.batch["returns"] * scale
