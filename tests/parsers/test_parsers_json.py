"""The ``json`` parser: bare and fenced JSON calls, lists, and JSON that is not a call."""

from __future__ import annotations

from typing import Any

import pytest
from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser

from extensions.parsers import ParseResult

WRITE = 'Write {"name": <tool>, "arguments": {...}}.'


async def test_single_bare_call(parse_response) -> None:
    text = 'Let me check.\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
    assert await parse_response("json", text) == ParseResult(
        content="Let me check.",
        calls=[
            FunctionCall(name="get_weather", arguments='{"city": "Paris", "unit": "celsius"}', tool_call_id="call_0")
        ],
    )


async def test_parameters_is_an_alias_and_arguments_are_re_serialized(parse_response) -> None:
    result = await parse_response("json", '{"type": "function", "name": "add", "parameters": {"a":1,"b":[2, 3]}}')
    assert result.calls == [FunctionCall(name="add", arguments='{"a": 1, "b": [2, 3]}', tool_call_id="call_0")]
    assert (result.content, result.errors) == ("", [])


async def test_arguments_given_as_a_json_string_are_accepted(parse_response) -> None:
    result = await parse_response("json", '{"name": "search", "arguments": "{\\"query\\": \\"verl\\"}"}')
    assert result.calls == [FunctionCall(name="search", arguments='{"query": "verl"}', tool_call_id="call_0")]


async def test_parallel_calls_as_a_list(parse_response) -> None:
    text = '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]'
    assert await parse_response("json", text) == ParseResult(
        content="",
        calls=[
            FunctionCall(name="get_weather", arguments='{"city": "Paris"}', tool_call_id="call_0"),
            FunctionCall(name="get_time", arguments="{}", tool_call_id="call_1"),
        ],
    )


async def test_fenced_block_is_removed_from_content(parse_response) -> None:
    text = 'I will search.\n```json\n{"name": "search", "arguments": {"query": "verl"}}\n```\nThen answer.'
    assert await parse_response("json", text) == ParseResult(
        content="I will search.\n\nThen answer.",
        calls=[FunctionCall(name="search", arguments='{"query": "verl"}', tool_call_id="call_0")],
    )


async def test_several_fenced_blocks_are_several_calls(parse_response) -> None:
    text = (
        "Two lookups:\n"
        '```json\n{"name": "search", "arguments": {"query": "a"}}\n```\n'
        '```\n{"name": "search", "arguments": {"query": "b"}}\n```'
    )
    result = await parse_response("json", text)
    assert result.calls == [
        FunctionCall(name="search", arguments='{"query": "a"}', tool_call_id="call_0"),
        FunctionCall(name="search", arguments='{"query": "b"}', tool_call_id="call_1"),
    ]
    assert (result.content, result.errors) == ("Two lookups:", [])


async def test_malformed_json_is_reported_and_kept_in_content(parse_response) -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris" "unit": "c"}}'
    assert await parse_response("json", text) == ParseResult(
        content=text,
        errors=[f"Tool call 1 is not valid JSON: Expecting ',' delimiter at char 54. {WRITE}"],
    )


async def test_malformed_fenced_block_is_reported(parse_response) -> None:
    text = '```json\n{"name": "search", "arguments": {"query": "a"},}\n```'
    result = await parse_response("json", text)
    assert result.errors == [
        f"Tool call 1 is not valid JSON: Expecting property name enclosed in double quotes at char 47. {WRITE}"
    ]
    assert (result.content, result.calls) == (text, [])


async def test_missing_name(parse_response) -> None:
    text = '[{"name": "get_time", "arguments": {}}, {"arguments": {"city": "Paris"}}]'
    assert await parse_response("json", text) == ParseResult(
        content=text,
        calls=[FunctionCall(name="get_time", arguments="{}", tool_call_id="call_0")],
        errors=[f'Tool call 2 has no "name". {WRITE}'],
    )


async def test_non_object_arguments(parse_response) -> None:
    result = await parse_response("json", '{"name": "search", "arguments": ["verl", 3]}')
    assert result.errors == [f'Tool call 1: "arguments" must be a JSON object, got a list. {WRITE}']
    assert result.calls == []


async def test_non_string_name(parse_response) -> None:
    result = await parse_response("json", '{"name": 7, "parameters": {}}')
    assert result.errors == [f'Tool call 1: "name" must be a non-empty string, got a number. {WRITE}']


async def test_plain_text_has_no_calls(parse_response) -> None:
    text = "The capital of France is Paris. Sets look like {1, 2} and lists like [1, 2]."
    assert await parse_response("json", text) == ParseResult(content=text)


async def test_json_that_is_not_a_call_is_left_alone(parse_response) -> None:
    text = (
        'A record: {"name": "Ada Lovelace", "born": 1815}\n'
        'Just a name: {"name": "get_time"}\n'
        'A table: [{"name": "a", "size": 1}, {"name": "b", "size": 2}]\n'
        'A schema: {"name": "search", "description": "Web search", "parameters": {"type": "object"}}\n'
        'Nested: {"call": {"name": "search", "arguments": {}}}\n'
        '```python\nrun({"name": "search", "arguments": {}})\n```'
    )
    assert await parse_response("json", text) == ParseResult(content=text)


async def test_unicode_arguments_are_not_escaped(parse_response) -> None:
    text = '{"name": "get_weather", "arguments": {"city": "北京", "note": "晴天 ☀️", "emoji": "\\ud83c\\udf27"}}'
    result = await parse_response("json", text)
    assert result.calls == [
        FunctionCall(
            name="get_weather", arguments='{"city": "北京", "note": "晴天 ☀️", "emoji": "🌧"}', tool_call_id="call_0"
        )
    ]


def test_deep_nesting_is_skipped_and_reported_only_for_calls(qwen_tokenizer: Any) -> None:
    parser = ToolParser.get_tool_parser("json", qwen_tokenizer)
    text = "[" * 50_000 + ' {"name": "f", "arguments": ' + "[" * 50_000
    assert parser.parse(text).errors == [f"Tool call 1 is nested too deeply to parse. {WRITE}"]


@pytest.mark.parametrize("parser", ["json", "auto"])
async def test_a_fence_with_several_json_values_is_several_calls(parse_response, parser: str) -> None:
    """As the 0.5B model writes them (docs/results/ledger-flagged-h200): one object per line in one fence."""
    text = (
        '```json\n{"name": "read_page", "arguments": {"page": 1}}\n'
        '{"name": "submit_answer", "arguments": {"answer": 70}}\n```'
    )
    result = await parse_response(parser, text)
    assert result.calls == [
        FunctionCall(name="read_page", arguments='{"page": 1}', tool_call_id="call_0"),
        FunctionCall(name="submit_answer", arguments='{"answer": 70}', tool_call_id="call_1"),
    ]
    assert (result.content, result.errors) == ("", [])


async def test_a_fence_whose_second_value_is_broken_is_one_error(parse_response) -> None:
    text = '```json\n{"name": "read_page", "arguments": {"page": 1}}\n{"name": "submit_answer", "arguments": {\n```'
    result = await parse_response("json", text)
    assert result.errors == [f"Tool call 1 is not valid JSON: Extra data at char 48. {WRITE}"]
    assert (result.content, result.calls) == (text, [])
