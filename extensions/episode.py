"""Per-trajectory state of ``LongWorkflowAgent``: counters, turn records, termination.

Everything a user needs to understand a trajectory ends up in ``extra_fields["extras"]``
(one stable key, so verl's batch concat works when loops of other kinds share a batch).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import AgentData


class Reason(str, Enum):
    """Why a trajectory ended."""

    FINAL_ANSWER = "final_answer"
    INTERACTION_DONE = "interaction_done"
    MAX_ASSISTANT_TURNS = "max_assistant_turns"
    MAX_TOOL_ROUNDS = "max_tool_rounds"
    MAX_USER_TURNS = "max_user_turns"
    RESPONSE_BUDGET = "response_budget"
    PROMPT_TOO_LONG = "prompt_too_long"
    ERROR = "error"


class Phase(Enum):
    PENDING = "pending"
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    INTERACTING = "interacting"
    TERMINATED = "terminated"


class Episode(AgentData):
    """verl's AgentData plus what the long-workflow loop tracks."""

    def __init__(self, *, messages: list[dict[str, Any]], request_id: str, tools_kwargs: dict[str, Any]):
        super().__init__(
            messages=messages,
            image_data=None,
            video_data=None,
            audio_data=None,
            mm_processor_kwargs=None,
            metrics={},
            request_id=request_id,
            tools_kwargs=tools_kwargs,
        )
        self.tool_rounds = 0
        self.num_tool_calls = 0
        self.num_tool_errors = 0
        self.num_malformed_tool_calls = 0
        self.parse_errors: list[str] = []
        self.turns: list[dict[str, Any]] = []
        self.reason: Reason | None = None
        self.error: str | None = None
        self.final_answer_text = ""
        self.last_assistant_ids: list[int] = []
        self.interaction: Any = None
        self.interaction_name: str | None = None
        self.interaction_id: str | None = None
        self.interaction_kwargs: dict[str, Any] = {}
        self.tool_session: Any = None
        self.schemas: list[dict[str, Any]] | None = None
        self.opening_message: str | None = None

    def finish(self, reason: Reason, detail: str | None = None) -> Phase:
        """Set the termination reason (the first one wins) and stop."""
        if self.reason is None:
            self.reason = reason
            self.error = detail
        return Phase.TERMINATED

    def add_turn(self, role: str, start: int, end: int, **fields: Any) -> dict[str, Any]:
        """Record a turn whose tokens are ``response[start:end]``."""
        record = {"index": len(self.turns), "role": role, "span": [start, end], **fields}
        self.turns.append(record)
        return record

    def extras(self, agent_name: str) -> dict[str, Any]:
        """The ``extra_fields["extras"]`` payload."""
        return {
            "agent_name": agent_name,
            "termination_reason": (self.reason or Reason.ERROR).value,
            "error": self.error,
            "turns": self.turns,
            "num_assistant_turns": self.assistant_turns,
            "num_tool_rounds": self.tool_rounds,
            "num_user_turns": self.user_turns,
            "num_tool_calls": self.num_tool_calls,
            "num_tool_errors": self.num_tool_errors,
            "num_malformed_tool_calls": self.num_malformed_tool_calls,
            "final_answer_text": self.final_answer_text,
            "interaction": self.interaction_name,
            "opening_message": self.opening_message,
        }


def think_spans(token_ids: list[int], start_id: int, end_id: int) -> list[tuple[int, int]]:
    """Half-open spans covering ``<think> ... </think>`` (tags included; an unclosed block runs to the end)."""
    spans, open_at = [], None
    for i, tok in enumerate(token_ids):
        if tok == start_id and open_at is None:
            open_at = i
        elif tok == end_id and open_at is not None:
            spans.append((open_at, i + 1))
            open_at = None
    if open_at is not None:
        spans.append((open_at, len(token_ids)))
    return spans
