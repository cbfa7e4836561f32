"""Checks that stop a training step whose signal is wrong, instead of training on it.

The plugin installs ``after_advantages`` as the verl seam's post-advantage hook (v1 trainer: it runs after
``compute_advantage_for_multi_trajectories`` on every training step, with each row's ``extras``):

1. ``check_error_rate``: more than ``algorithm.max_error_rate`` of the step's trajectories ended in ``error``
   (``catch_errors`` turns a bug into a masked ``error`` trajectory, so a climbing rate is a broken run, not
   data). Set it with ``+algorithm.max_error_rate=0.05``; 1.0 never stops. The rollout CLI's
   ``--max-error-rate`` is the same rule.
2. ``check_finite``: a NaN or inf score or advantage (one NaN poisons its whole GRPO group) names the rows.
3. ``segment_weights.weigh_advantages``: folded trajectories' segments weigh 1/N.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from extensions.errors import ConfigError, LongflowError
from extensions.segment_weights import is_last_segment, weigh_advantages

MAX_ERROR_RATE = "max_error_rate"
DEFAULT_MAX_ERROR_RATE = 0.05
"""Default of ``algorithm.max_error_rate``: no committed run had a single ``error`` trajectory."""


class TrainingSignalError(LongflowError, RuntimeError):
    """A training step's scores, rewards or trajectories are unusable; training stops."""


def max_error_rate(config: Any) -> float:
    """``algorithm.max_error_rate`` (a fraction in [0, 1]), checked."""
    value = DEFAULT_MAX_ERROR_RATE if config is None else config.get(MAX_ERROR_RATE, DEFAULT_MAX_ERROR_RATE)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"algorithm.{MAX_ERROR_RATE} must be a number between 0 and 1, got {value!r}")
    return float(value)


def check_error_rate(rows: Sequence[Mapping[str, Any] | None], limit: float) -> None:
    """Raise when more than ``limit`` of the trajectories (rows with records; a folded one counted once, at its
    last segment) ended with reason ``error``; the message gives the count, the rate and the first errors."""
    finals = [row for i, row in enumerate(rows) if row is not None and is_last_segment(row, row_index=i)]
    errors = [row for row in finals if row.get("termination_reason") == "error"]
    if not finals or len(errors) <= limit * len(finals):
        return
    details = "; ".join(sorted({str(row.get("error") or "no detail recorded") for row in errors})[:3])
    raise TrainingSignalError(
        f"{len(errors)} of {len(finals)} trajectories ({len(errors) / len(finals):.1%}) ended in `error` this step, "
        f"more than algorithm.{MAX_ERROR_RATE}={limit}; training stops rather than learn from masked rows. "
        f"First errors: {details}. Fix the cause (run the rollout CLI on a few samples: "
        "`python -m extensions.rollout ... --max-error-rate 0`), or raise the limit with "
        f"+algorithm.{MAX_ERROR_RATE}=<fraction>"
    )


def check_finite(data: Any, uids: Sequence[Any] | None = None) -> None:
    """Raise when a row's summed reward (``token_level_rewards``) or its advantages hold NaN or inf."""
    for key in ("token_level_rewards", "advantages"):
        if key not in data.batch:
            continue
        values = data.batch[key]
        bad = (~torch.isfinite(values)).flatten(1).any(dim=1) if values.dim() > 1 else ~torch.isfinite(values)
        rows = bad.nonzero().flatten().tolist()
        if rows:
            named = ", ".join(f"row {i}" + (f" (uid {uids[i]})" if uids is not None else "") for i in rows[:5])
            raise TrainingSignalError(
                f"{key} is not finite in {len(rows)} of {len(values)} rows: {named}. A NaN or inf score poisons its "
                "whole GRPO group; find the reward or score that produced it (extensions/rewards/trajectory.py "
                "names non-finite turn scores and tool rewards)"
            )


def after_advantages(data: Any, rows: Sequence[Mapping[str, Any] | None] | None, config: Any) -> None:
    """The post-advantage hook: error rate, finite scores, then the segment weights (module docstring)."""
    if rows is not None:
        check_error_rate(rows, max_error_rate(config))
    uids = getattr(data, "non_tensor_batch", {}).get("uid")
    check_finite(data, None if uids is None else list(uids))
    weigh_advantages(data, rows, config)
