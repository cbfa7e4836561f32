"""``json``: tool calls written as plain JSON, bare in the text or in a ```json fence.

    I'll look it up.
    ```json
    {"name": "search", "arguments": {"query": "verl"}}
    ```

A call is an object with a string "name" and "arguments" (alias "parameters"), and no keys
but those and "type"/"id"; a JSON list holding such objects is parallel calls, and several
fences or objects are several calls. Other JSON is left alone (see ``looks_like_call``).

Fences tagged ``json`` or untagged hold one JSON value each, or several one after another (the 0.5B model
writes a ``read_page`` and a ``submit_answer`` call in one fence: docs/results/ledger-flagged-h200), each
a call; fences in other languages are never read. Outside fences, every ``{"`` and ``[{`` is tried as the start of a JSON value,
and a value that decodes is skipped whole (calls nested in other JSON are not calls); text
that starts like a call (``{"name":``) but is not valid JSON is reported as an error.
"""

from __future__ import annotations

import json
import re

from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers.base import Attempt, DetailedToolParser, blank_spans
from extensions.parsers.calls import (
    CALL_START,
    DECODER,
    JSON_CALL_EXAMPLE,
    attempts_from_value,
    balanced_end,
    json_problem,
)

FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
JSON_FENCE_LANGUAGES = frozenset({"", "json"})
# Where a call or a list of calls can start: an object with a quoted key, or a list opening with one.
VALUE_START = re.compile(r"""\{\s*["']|\[\s*\{""")


def scan_json(visible: str) -> list[Attempt]:
    """Calls in fenced blocks first, then in the text around them; ``parse`` sorts by position."""
    fences = list(FENCE.finditer(visible))
    attempts = [a for fence in fences if fence.group(1).lower() in JSON_FENCE_LANGUAGES for a in _scan_fence(fence)]
    outside = blank_spans(visible, [fence.span() for fence in fences])
    return attempts + _scan_bare(outside)


def _scan_fence(fence: re.Match[str]) -> list[Attempt]:
    body = fence.group(2).strip()
    start, end = fence.span()
    try:
        values = [json.loads(body)]
    except (json.JSONDecodeError, RecursionError) as error:
        values = _json_sequence(body) if isinstance(error, json.JSONDecodeError) and error.msg == "Extra data" else None
        if values is None:
            return (
                [Attempt(start, end, JSON_CALL_EXAMPLE, problem=json_problem(error))] if CALL_START.match(body) else []
            )
    return [a for value in values for a in attempts_from_value(value, start, end, JSON_CALL_EXAMPLE)]


def _json_sequence(body: str) -> list | None:
    """The JSON values of ``body`` written one after another (whitespace between), or None if any part is not JSON."""
    values, position = [], 0
    while position < len(body):
        try:
            value, position = DECODER.raw_decode(body, position)
        except (json.JSONDecodeError, RecursionError):
            return None
        values.append(value)
        position = len(body) - len(body[position:].lstrip())
    return values


def _scan_bare(text: str) -> list[Attempt]:
    attempts: list[Attempt] = []
    position = 0
    while match := VALUE_START.search(text, position):
        start = match.start()
        try:
            value, end = DECODER.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError) as error:
            is_call = CALL_START.match(text, start) is not None
            if not is_call and isinstance(error, json.JSONDecodeError):
                position = start + 1
                continue
            position = balanced_end(text, start)  # skip a broken call, or nesting too deep to be one
            if is_call:
                attempts.append(Attempt(start, position, JSON_CALL_EXAMPLE, problem=json_problem(error, start)))
            continue
        attempts.extend(attempts_from_value(value, start, end, JSON_CALL_EXAMPLE))
        position = end
    return attempts


@ToolParser.register("json")
class JsonToolParser(DetailedToolParser):
    """Calls as bare or fenced JSON objects, or lists of them."""

    def scan(self, visible: str) -> list[Attempt]:
        """See ``scan_json``."""
        return scan_json(visible)
