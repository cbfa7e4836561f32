"""Calls written inside ``<think>`` are never executed, in every format (verl issue #4757)."""

from __future__ import annotations

import pytest
from verl.experimental.agent_loop.tool_parser import FunctionCall

from extensions.parsers import ParseResult

TAGGED = '<tool_call>\n{"name": "search", "arguments": {"query": "verl"}}\n</tool_call>'
BARE = '{"name": "search", "arguments": {"query": "verl"}}'
REACT = 'Action: search\nAction Input: {"query": "verl"}'
CALL_TEXT = {"hermes_strict": TAGGED, "json": BARE, "react": REACT, "auto": TAGGED}
SEARCH = FunctionCall(name="search", arguments='{"query": "verl"}', tool_call_id="call_0")
PARSERS = pytest.mark.parametrize("parser", sorted(CALL_TEXT))


@PARSERS
async def test_only_the_call_after_thinking_runs(parse_response, parser: str) -> None:
    call = CALL_TEXT[parser]
    thinking = f"<think>\nMaybe this:\n{call}\n</think>"
    assert await parse_response(parser, f"{thinking}\nSearching.\n{call}") == ParseResult(
        content=f"{thinking}\nSearching.", calls=[SEARCH]
    )


@PARSERS
async def test_a_call_only_in_thinking_does_not_run(parse_response, parser: str) -> None:
    text = f"<think>\n{CALL_TEXT[parser]}\n</think>\nThe answer is 4."
    assert await parse_response(parser, text) == ParseResult(content=text)


@PARSERS
async def test_an_unclosed_think_runs_to_the_end(parse_response, parser: str) -> None:
    text = f"<think>\nLet me try\n{CALL_TEXT[parser]}"
    assert await parse_response(parser, text) == ParseResult(content=text)


@PARSERS
async def test_reasoning_opened_by_the_prompt_ends_at_the_first_close_tag(parse_response, parser: str) -> None:
    text = f"Let me try\n{CALL_TEXT[parser]}\n</think>\nThe answer is 4."
    assert await parse_response(parser, text) == ParseResult(content=text)


async def test_malformed_calls_while_thinking_are_not_errors(parse_response) -> None:
    text = '<think><tool_call>{"name": </tool_call> {"name": "x", "arguments": [}</think>\nDone.'
    assert await parse_response("auto", text) == ParseResult(content=text)
