"""The ``auto`` parser: hermes tags, else JSON, else ReAct; the first format that finds anything wins."""

from __future__ import annotations

from verl.experimental.agent_loop.tool_parser import FunctionCall

from extensions.parsers import ParseResult

TAGGED = '<tool_call>\n{"name": "search", "arguments": {"query": "tagged"}}\n</tool_call>'
BARE = '{"name": "search", "arguments": {"query": "bare"}}'
REACT = 'Action: search\nAction Input: {"query": "react"}'


async def test_hermes_tags_win_over_json_and_react(parse_response) -> None:
    assert await parse_response("auto", f"{BARE}\n{TAGGED}\n{REACT}") == ParseResult(
        content=f"{BARE}\n\n{REACT}",
        calls=[FunctionCall(name="search", arguments='{"query": "tagged"}', tool_call_id="call_0")],
    )


async def test_a_malformed_tag_still_wins(parse_response) -> None:
    text = f'<tool_call>{{"name": "search", "arguments": }}</tool_call>\n{BARE}'
    assert await parse_response("auto", text) == ParseResult(
        content=text,
        errors=[
            "Tool call 1 is not valid JSON: Expecting value at char 32. "
            'Write <tool_call>{"name": <tool>, "arguments": {...}}</tool_call>.'
        ],
    )


async def test_json_wins_over_react(parse_response) -> None:
    assert await parse_response("auto", f"{REACT}\n{BARE}") == ParseResult(
        content=REACT,
        calls=[FunctionCall(name="search", arguments='{"query": "bare"}', tool_call_id="call_0")],
    )


async def test_react_when_nothing_else_matches(parse_response) -> None:
    assert await parse_response("auto", f"Thought: look it up.\n{REACT}") == ParseResult(
        content="Thought: look it up.",
        calls=[FunctionCall(name="search", arguments='{"query": "react"}', tool_call_id="call_0")],
    )


async def test_plain_text_has_no_calls(parse_response) -> None:
    text = 'Paris. Data like {"name": "Ada"} is not a call.'
    assert await parse_response("auto", text) == ParseResult(content=text)
