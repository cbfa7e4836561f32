"""``hermes_strict``: Qwen/Hermes ``<tool_call>{...}</tool_call>`` tags, with error reporting.

verl's ``hermes`` parser logs a malformed call and drops it, so the model never learns why
nothing happened. Here every tag is a call attempt: valid JSON objects become calls, and
bad JSON, a missing "name", non-object "arguments" or a missing ``</tool_call>`` become
errors. ``{"name": "get_time"}`` with no "arguments" is a call with ``{}``.
"""

from __future__ import annotations

import json

from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers.base import Attempt, DetailedToolParser
from extensions.parsers.calls import check_call, json_problem

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
HERMES_EXAMPLE = '<tool_call>{"name": <tool>, "arguments": {...}}</tool_call>'


def scan_hermes(visible: str) -> list[Attempt]:
    """One attempt per ``<tool_call>``; a tag left open runs to the next opening tag or the end."""
    attempts: list[Attempt] = []
    position = 0
    while (start := visible.find(OPEN_TAG, position)) != -1:
        body_start = start + len(OPEN_TAG)
        close = visible.find(CLOSE_TAG, body_start)
        next_open = visible.find(OPEN_TAG, body_start)
        if close == -1 or (next_open != -1 and next_open < close):
            position = len(visible) if next_open == -1 else next_open
            problem = f" has no closing {CLOSE_TAG} tag"
            attempts.append(Attempt(start, position, HERMES_EXAMPLE, problem=problem))
            continue
        position = close + len(CLOSE_TAG)
        attempts.append(_check_payload(visible[body_start:close].strip(), start, position))
    return attempts


def _check_payload(payload: str, start: int, end: int) -> Attempt:
    try:
        value = json.loads(payload)
    except (json.JSONDecodeError, RecursionError) as error:
        return Attempt(start, end, HERMES_EXAMPLE, problem=json_problem(error))
    return check_call(value, start, end, HERMES_EXAMPLE)


@ToolParser.register("hermes_strict")
class HermesStrictToolParser(DetailedToolParser):
    """Hermes tags like verl's ``hermes``, but malformed calls come back as errors."""

    def scan(self, visible: str) -> list[Attempt]:
        """See ``scan_hermes``."""
        return scan_hermes(visible)
