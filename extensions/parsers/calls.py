"""Shared checks for JSON tool calls: ``{"name": <tool>, "arguments": {...}}``.

Every format ends in such an object (hermes tags, bare or fenced JSON) or in a name plus a
JSON object (ReAct). These functions turn a decoded value into an ``Attempt`` and phrase the
problems; ``problem`` strings continue the sentence ``Tool call <n>``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from extensions.parsers.base import Attempt

JSON_CALL_EXAMPLE = '{"name": <tool>, "arguments": {...}}'
ARGUMENT_KEYS = ("arguments", "parameters")
# Keys a bare JSON object may have and still be read as a call (Llama 3 adds "type"; some add "id").
CALL_KEYS = frozenset({"name", *ARGUMENT_KEYS, "type", "id"})
# Text that starts like a call: '{"name":', '[{"arguments":', "{'name':" (a Python dict).
CALL_START = re.compile(r"""[\[{]\s*(?:\{\s*)?["'](?:name|arguments|parameters)["']\s*:""")
DECODER = json.JSONDecoder()


def json_kind(value: Any) -> str:
    """How a JSON value reads in a message: ``a list``, ``a string``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    return "a list" if isinstance(value, list) else "an object"


def json_problem(error: json.JSONDecodeError | RecursionError, offset: int = 0) -> str:
    """``' is not valid JSON: Expecting ',' delimiter at char 31'``, ``char`` counted from ``offset``.

    An error at the very end (nothing but whitespace follows) means the call was cut short;
    a ``RecursionError`` (thousands of nested brackets) gets its own message.
    """
    if isinstance(error, RecursionError):
        return " is nested too deeply to parse"
    problem = f" is not valid JSON: {error.msg} at char {error.pos - offset}"
    if not error.doc[error.pos :].strip():
        problem += ' (the end: a closing }, ] or " is missing)'
    return problem


def check_call(value: Any, start: int, end: int, example: str) -> Attempt:
    """Validate a decoded call object; ``arguments`` (alias ``parameters``) may be absent: ``{}``.

    A string holding a JSON object (OpenAI's wire form) is accepted as the arguments.
    """
    if not isinstance(value, dict):
        return Attempt(start, end, example, problem=f" must be a JSON object, got {json_kind(value)}")
    if "name" not in value:
        return Attempt(start, end, example, problem=' has no "name"')
    name = value["name"]
    if not isinstance(name, str) or not name.strip():
        return Attempt(start, end, example, problem=f': "name" must be a non-empty string, got {json_kind(name)}')
    key = next((k for k in ARGUMENT_KEYS if k in value), "arguments")
    arguments = value.get(key, {})
    if isinstance(arguments, str) and (decoded := _object_or_none(arguments)) is not None:
        arguments = decoded
    if not isinstance(arguments, dict):
        problem = f': "{key}" must be a JSON object, got {json_kind(arguments)}'
        return Attempt(start, end, example, problem=problem)
    return Attempt(start, end, example, name=name.strip(), arguments=arguments)


def looks_like_call(value: Any) -> bool:
    """True for an object whose keys are all call keys and that has "arguments" or "parameters".

    This keeps ordinary JSON (``{"name": "Ada", "age": 36}``, a tool schema with a
    "description") out of the calls; ``{"name": "get_time"}`` alone is not a call either,
    since a record with just a name is as likely. Inside ``<tool_call>`` tags it would be.
    """
    return isinstance(value, dict) and set(value) <= CALL_KEYS and any(k in value for k in ARGUMENT_KEYS)


def attempts_from_value(value: Any, start: int, end: int, example: str) -> list[Attempt]:
    """A call, a list holding at least one call (parallel calls), or nothing for other JSON."""
    if looks_like_call(value):
        return [check_call(value, start, end, example)]
    if isinstance(value, list) and any(looks_like_call(item) for item in value):
        return [check_call(item, start, end, example) for item in value]
    return []


def balanced_end(text: str, start: int) -> int:
    """End of the bracketed value opening at ``start``, strings respected; ``len(text)`` if unclosed."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def _object_or_none(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
