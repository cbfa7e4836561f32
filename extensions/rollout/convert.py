"""Turn the rows of verl's output batch into ``TrajectoryRecord``s."""

from __future__ import annotations

from typing import Any

import numpy as np
from verl.protocol import DataProto

from extensions.rollout.records import (
    CodeCallRecord,
    SegmentRecord,
    ToolCallRecord,
    TrajectoryRecord,
    TurnRecord,
    split_thinking,
)


def _plain(value: Any) -> Any:
    """numpy scalars/arrays from parquet → plain Python, recursively."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def row_tokens(out: DataProto, i: int) -> tuple[list[int], list[int], list[int], list[float] | None]:
    """Unpadded (prompt_ids, response_ids, response_mask, logprobs) of row ``i``."""
    prompt_width = out.batch["prompts"].shape[1]
    attention = out.batch["attention_mask"][i]
    n_prompt, n_response = int(attention[:prompt_width].sum()), int(attention[prompt_width:].sum())
    prompt_ids = out.batch["prompts"][i, prompt_width - n_prompt :].tolist()
    response_ids = out.batch["responses"][i, :n_response].tolist()
    mask = out.batch["response_mask"][i, :n_response].tolist()
    logprobs = out.batch["rollout_log_probs"][i, :n_response].tolist() if "rollout_log_probs" in out.batch else None
    return prompt_ids, response_ids, mask, logprobs


def build_turns(
    tokenizer: Any, extras: dict[str, Any] | None, response_ids: list[int], mask: list[int]
) -> list[TurnRecord]:
    """Turn records from the loop's extras; loops without extras get one whole-response turn."""
    raw_turns = extras["turns"] if extras else [{"role": "assistant", "span": [0, len(response_ids)]}]
    turns = []
    for raw in raw_turns:
        lo, hi = raw["span"]
        text = tokenizer.decode(response_ids[lo:hi])
        visible, thinking = split_thinking(tokenizer.decode(response_ids[lo:hi], skip_special_tokens=True))
        calls = [ToolCallRecord(**c) for c in raw.get("tool_calls", []) if isinstance(c, dict)]
        turns.append(
            TurnRecord(
                role=raw["role"],
                span=(lo, hi),
                text=text if raw["role"] != "user" or hi > lo else raw.get("text", ""),
                visible_text=visible if raw["role"] == "assistant" else str(raw.get("text", "")),
                thinking=thinking if raw["role"] == "assistant" else "",
                tool_calls=calls,
                malformed_tool_calls=list(raw.get("malformed_tool_calls", [])),
                code_calls=[CodeCallRecord(**c) for c in raw.get("code_calls", []) if isinstance(c, dict)],
                score=raw.get("score"),
                latency_s=float(raw.get("latency_s", 0.0)),
                trained=any(mask[lo:hi]),
                fold=bool(raw.get("fold")),
                summary=bool(raw.get("summary")),
                summary_tagged=raw.get("summary_tagged"),
            )
        )
    _attach_parsed_calls(turns)
    return turns


def _attach_parsed_calls(turns: list[TurnRecord]) -> None:
    """Copy each tool turn's calls onto the assistant turn that made them."""
    for before, after in zip(turns, turns[1:], strict=False):
        if before.role == "assistant" and after.role == "tool":
            before.tool_calls = [c.model_copy(update={"result": None}) for c in after.tool_calls]


def to_record(out: DataProto, i: int, tokenizer: Any, *, timings: dict[str, float] | None = None) -> TrajectoryRecord:
    columns = out.non_tensor_batch
    prompt_ids, response_ids, mask, logprobs = row_tokens(out, i)
    extras = _plain(columns["extras"][i]) if "extras" in columns else None
    extra_info = _plain(columns.get("extra_info", [None] * len(out))[i]) or {}
    reward_model = _plain(columns.get("reward_model", [None] * len(out))[i]) or {}
    index = extra_info.get("index", columns["index"][i] if "index" in columns else i)
    return TrajectoryRecord(
        index=int(index),
        agent_name=str(columns["agent_name"][i]),
        data_source=_plain(columns["data_source"][i]) if "data_source" in columns else None,
        ground_truth=None if reward_model.get("ground_truth") is None else str(reward_model["ground_truth"]),
        raw_prompt=_plain(columns["raw_prompt"][i]),
        interaction=(extras or {}).get("interaction"),
        tools_kwargs=_plain(columns["tools_kwargs"][i]) if "tools_kwargs" in columns else {},
        opening_message=(extras or {}).get("opening_message"),
        turns=build_turns(tokenizer, extras, response_ids, mask),
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        response_mask=mask,
        logprobs=logprobs,
        termination_reason=(extras or {}).get("termination_reason", "final_answer"),
        error=(extras or {}).get("error"),
        turn_scores=[float(s) for s in _plain(columns["turn_scores"][i]) or []],
        tool_rewards=[float(s) for s in _plain(columns["tool_rewards"][i]) or []],
        timings=timings or {},
        segments=[_segment(tokenizer, s) for s in _plain(columns["segments"][i]) or []]
        if "segments" in columns
        else [],
    )


def _segment(tokenizer: Any, payload: dict[str, Any]) -> SegmentRecord:
    """An earlier segment of a folded trajectory (``verl_compat.accept_segment_lists``'s payload)."""
    extras = payload.get("extras") or {}
    response, mask = payload["response_ids"], payload["response_mask"]
    return SegmentRecord(
        prompt_ids=payload["prompt_ids"],
        response_ids=response,
        response_mask=mask,
        logprobs=payload.get("response_logprobs"),
        turns=build_turns(tokenizer, extras or None, response, mask),
        fold_trigger=extras.get("fold_trigger"),
        summary_tokens=int(extras.get("summary_tokens") or 0),
    )


def failed_records(batch: DataProto, error: BaseException) -> list[TrajectoryRecord]:
    """Records for a batch that failed as a whole (e.g. an unknown agent_name)."""
    columns, records = batch.non_tensor_batch, []
    message = f"{type(error).__name__}: {error}"
    for i in range(len(batch)):
        extra_info = _plain(columns.get("extra_info", [None] * len(batch))[i]) or {}
        records.append(
            TrajectoryRecord(
                index=int(extra_info.get("index", i)),
                agent_name=str(columns["agent_name"][i]) if "agent_name" in columns else "?",
                raw_prompt=_plain(columns["raw_prompt"][i]),
                turns=[],
                prompt_ids=[],
                response_ids=[],
                response_mask=[],
                termination_reason="error",
                error=message,
            )
        )
    return records
