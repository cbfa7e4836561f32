"""``longflow/`` metrics of a batch of trajectories, added to verl's trainer logs.

verl logs what its trainer computes; ``extensions.verl_compat`` hooks add these to every training
step (from each row's ``extras``) and every validation (from the reward's extra info, which
``extensions.custom_rewards.compute_score`` fills with the same counts), so they reach the console
and any logger the user enables (W&B, tensorboard, mlflow):

    longflow/recorded_fraction              rows whose loop recorded extras (LongWorkflowAgent rows)
    longflow/termination/<reason>           fraction of recorded rows that ended for <reason>
    longflow/<count>/mean                   assistant_turns, tool_rounds, user_turns, tool_calls,
                                            tool_errors, malformed_calls, executed_calls,
                                            successful_calls, invented_outputs, repeated_blocks
                                            (per recorded row)
    longflow/execution_success_rate         successful / executed calls over the batch (rows with calls)
    longflow/assistant_turns/max
    longflow/segments/mean, /max            segments per folded-or-not trajectory (folding loops; rows
                                            that say ``num_segments``)
    longflow/summary_tokens/mean            tokens of each fold's summary
    longflow/folds/<trigger>                folds per trajectory by trigger (context, budget, tool)
    longflow/rollout/wall_s/mean, /p50, /p90, /max
                                            a trajectory's wall time, start to last output (p: nearest rank)
    longflow/rollout/span_s                 the batch's first start to its last finish (sync: real generation time)
    longflow/rollout/take_lag_s             the last finish to the trainer taking the batch (v1 replay buffer poll)
    longflow/rollout/slowest/tool_s, /generate_s, /user_s, /generated_tokens, /assistant_turns
                                            the slowest trajectory's time in tools (code blocks run inside a
                                            turn included), generating and in user turns; its tokens and turns
    longflow/policy_versions/mixed_turns    assistant turns whose tokens came from more than one weight version
                                            (a reply aborted and resumed, or an update between a turn's replies)
    longflow/policy_versions/turn_span_max  the largest last - first weight version within one turn
    longflow/val/...                        the same, for a validation run
    longflow/val@<label>/...                the same, for the rows of a labelled data_source
                                            (``longflow/ledger@truncated``: a baseline in the same validation)

A trajectory folded into N segments is N rows; each per-trajectory figure above is taken from its
last segment, which carries the whole trajectory's counts and reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from extensions.custom_rewards import LABEL_SEP, split_label
from extensions.records_schema import TERMINATION_REASONS as REASONS
from extensions.segment_weights import is_last_segment, segment_count

COUNTS = {
    "assistant_turns": "num_assistant_turns",
    "tool_rounds": "num_tool_rounds",
    "user_turns": "num_user_turns",
    "tool_calls": "num_tool_calls",
    "tool_errors": "num_tool_errors",
    "malformed_calls": "num_malformed_tool_calls",
    "executed_calls": "num_executed_calls",
    "successful_calls": "num_successful_calls",
    "invented_outputs": "num_invented_outputs",
    "repeated_blocks": "num_repeated_blocks",
}
"""Metric name -> the ``extras`` key (and reward key) it averages: every ``records_schema.COUNTS`` key."""


def longflow_metrics(
    rows: Sequence[Mapping[str, Any] | None], prefix: str = "longflow/", *, sampled_at: float | None = None
) -> dict[str, float]:
    """Metrics of a training batch from each row's ``extras`` (None for rows without records).

    ``sampled_at``: when the trainer took the batch (``time.time()``; v1's replay buffer), for ``rollout/take_lag_s``.
    """
    recorded = [row for row in rows if row is not None]
    metrics = {f"{prefix}recorded_fraction": len(recorded) / len(rows) if rows else 0.0}
    metrics.update(rollout_timing([row for row in recorded if "finished_at" in row], prefix, sampled_at))
    metrics.update(version_metrics(recorded, prefix))
    segments = [row for row in recorded if "num_segments" in row]
    recorded = [row for row in recorded if is_last_segment(row)]
    if not recorded:
        return metrics
    if segments:
        metrics.update(_segment_metrics(segments, [row for row in recorded if "num_segments" in row], prefix))
    for reason in REASONS:
        metrics[f"{prefix}termination/{reason}"] = _mean([row.get("termination_reason") == reason for row in recorded])
    for name, key in COUNTS.items():
        metrics[f"{prefix}{name}/mean"] = _mean([row.get(key) or 0 for row in recorded])
    metrics[f"{prefix}assistant_turns/max"] = float(max(row.get("num_assistant_turns") or 0 for row in recorded))
    executed = sum(row.get("num_executed_calls") or 0 for row in recorded)
    if executed:
        metrics[f"{prefix}execution_success_rate"] = (
            sum(row.get("num_successful_calls") or 0 for row in recorded) / executed
        )
    return metrics


def rollout_timing(
    rows: Sequence[Mapping[str, Any]], prefix: str = "longflow/", sampled_at: float | None = None
) -> dict[str, float]:
    """Wall-clock figures of a batch from its rows' ``started_at`` / ``finished_at`` (every segment's row).

    ``rollout/wall_s/mean``, ``/p50``, ``/p90`` (nearest rank), ``/max``: a trajectory's time from start to its last
    output; ``rollout/span_s``: the first start to the last finish (in a synchronous step: the real generation time,
    to set beside verl's ``timing_s/gen``); ``rollout/take_lag_s``: the last finish to ``sampled_at``, how long the
    trainer took to notice (verl's 2 s poll makes it up to 2 s); ``rollout/slowest/...``: what the slowest trajectory
    (the one a synchronous step waits for) spent its time on, over all its segments (``time_split``).
    """
    if not rows:
        return {}
    trajectories: dict[float, float] = {}  # started_at -> the latest finish of its rows
    segments: dict[float, list[Mapping[str, Any]]] = {}
    for row in rows:
        start = float(row["started_at"])
        trajectories[start] = max(trajectories.get(start, start), float(row["finished_at"]))
        segments.setdefault(start, []).append(row)
    walls = [end - start for start, end in trajectories.items()]
    last = max(trajectories.values())
    slowest = max(trajectories, key=lambda start: trajectories[start] - start)
    metrics = {
        f"{prefix}rollout/wall_s/mean": _mean(walls),
        f"{prefix}rollout/wall_s/p50": nearest_rank(walls, 0.5),
        f"{prefix}rollout/wall_s/p90": nearest_rank(walls, 0.9),
        f"{prefix}rollout/wall_s/max": max(walls),
        f"{prefix}rollout/span_s": last - min(trajectories),
    }
    turns = [turn for row in segments[slowest] for turn in row.get("turns") or []]
    metrics.update({f"{prefix}rollout/slowest/{key}": value for key, value in time_split(turns).items()})
    if sampled_at is not None:
        metrics[f"{prefix}rollout/take_lag_s"] = sampled_at - last
    return metrics


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank: the smallest value with at least ``q`` of them at or below."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def time_split(turns: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Where one trajectory's time went, from its turn records (``records_schema.TurnRecord``).

    ``tool_s``: its tool rounds' wall time plus the code blocks run inside its assistant turns (code-fence format:
    ``code_calls``), each call's wait for a tool slot included; ``generate_s``: its assistant turns' wall time less
    those blocks, so waiting on the server too (its queue; an abort and resume across a weight update), and a block
    that ran but whose output had no room (it has no record); ``user_s``: its user turns' (a played user's reply);
    ``generated_tokens``: its assistant turns' tokens less the outputs inserted into them; ``assistant_turns``.
    What ``wall_s`` has beyond the three went elsewhere (the reward, the event loop serving other trajectories).
    """
    assistant = [turn for turn in turns if turn.get("role") == "assistant"]
    inline = [call for turn in assistant for call in turn.get("code_calls") or []]
    inline_s = sum(_latency(call) for call in inline)
    return {
        "tool_s": sum(_latency(turn) for turn in turns if turn.get("role") == "tool") + inline_s,
        "generate_s": max(0.0, sum(_latency(turn) for turn in assistant) - inline_s),
        "user_s": sum(_latency(turn) for turn in turns if turn.get("role") == "user"),
        "generated_tokens": float(
            sum(turn["span"][1] - turn["span"][0] for turn in assistant)
            - sum(call["span"][1] - call["span"][0] for call in inline if call.get("span"))
        ),
        "assistant_turns": float(len(assistant)),
    }


def _latency(record: Mapping[str, Any]) -> float:
    return float(record.get("latency_s") or 0.0)


def version_metrics(rows: Sequence[Mapping[str, Any]], prefix: str = "longflow/") -> dict[str, float]:
    """Asynchronous training (v1): ``policy_versions/mixed_turns``, the fraction of assistant turns whose tokens came
    from more than one weight version (a reply aborted by a weight update and resumed, or, in a code-fence turn of
    several replies, an update between two of them), and ``policy_versions/turn_span_max``, the largest last - first
    version within one turn. Nothing without the turns' ``policy_versions``."""
    spans = [
        turn["policy_versions"][1] - turn["policy_versions"][0]
        for row in rows
        for turn in row.get("turns") or []
        if turn.get("policy_versions")
    ]
    if not spans:
        return {}
    return {
        f"{prefix}policy_versions/mixed_turns": _mean([span > 0 for span in spans]),
        f"{prefix}policy_versions/turn_span_max": float(max(spans)),
    }


def _segment_metrics(
    segments: Sequence[Mapping[str, Any]], finals: Sequence[Mapping[str, Any]], prefix: str
) -> dict[str, float]:
    counts = [segment_count(row) for row in finals]
    folds = [row for row in segments if row.get("fold_trigger")]
    metrics = {
        f"{prefix}segments/mean": _mean(counts),
        f"{prefix}segments/max": float(max(counts, default=0)),
        f"{prefix}summary_tokens/mean": _mean([row.get("summary_tokens") or 0 for row in folds]),
    }
    for trigger in ("context", "budget", "tool"):
        n = sum(row["fold_trigger"] == trigger for row in folds)
        metrics[f"{prefix}folds/{trigger}"] = n / len(finals) if finals else 0.0
    return metrics


def validation_metrics(
    infos: Mapping[str, Sequence[Any]], prefix: str = "longflow/val/", data_sources: Sequence[Any] | None = None
) -> dict[str, float]:
    """Metrics of a validation run from verl's ``reward_extra_infos_dict`` (lists per reward key).

    Rows whose reward did not return a key hold None there and are left out of its mean. With ``data_sources``
    (one per row), the rows of each labelled source (``longflow/ledger@truncated``) are measured apart, under
    ``longflow/val@truncated/``, and the unlabelled rows alone under ``prefix``.
    """
    labels = [split_label(source)[1] for source in data_sources] if data_sources is not None else []
    if any(labels):
        metrics = {}
        for label in dict.fromkeys(labels):
            rows = [i for i, row_label in enumerate(labels) if row_label == label]
            part = {key: [values[i] for i in rows] for key, values in infos.items() if len(values) == len(labels)}
            metrics.update(validation_metrics(part, prefix if label is None else f"{prefix[:-1]}{LABEL_SEP}{label}/"))
        return metrics
    metrics = {}
    for reason in REASONS:
        values = [v for v in infos.get(f"term_{reason}") or [] if v is not None]
        if values:
            metrics[f"{prefix}termination/{reason}"] = _mean(values)
    for name, key in COUNTS.items():
        values = [v for v in infos.get(key) or [] if v is not None]
        if values:
            metrics[f"{prefix}{name}/mean"] = _mean(values)
    executed = sum(float(v) for v in infos.get("num_executed_calls") or [] if v is not None)
    if executed:
        successful = sum(float(v) for v in infos.get("num_successful_calls") or [] if v is not None)
        metrics[f"{prefix}execution_success_rate"] = successful / executed
    return metrics


def _mean(values: Sequence[Any]) -> float:
    return float(sum(float(v) for v in values) / len(values)) if values else 0.0
