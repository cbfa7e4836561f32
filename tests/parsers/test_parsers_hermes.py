"""The ``hermes_strict`` parser: Qwen's ``<tool_call>`` tags, with the errors verl's ``hermes`` drops."""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser

from extensions.parsers import ParseResult

WRITE = 'Write <tool_call>{"name": <tool>, "arguments": {...}}</tool_call>.'
WEATHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


async def test_single_call_as_qwen_writes_it(parse_response) -> None:
    assert await parse_response("hermes_strict", f"I'll check the weather.\n{WEATHER}") == ParseResult(
        content="I'll check the weather.",
        calls=[FunctionCall(name="get_weather", arguments='{"city": "Paris"}', tool_call_id="call_0")],
    )


async def test_parallel_calls(parse_response) -> None:
    text = f'{WEATHER}\n<tool_call>\n{{"name": "get_time", "arguments": {{"tz": "CET"}}}}\n</tool_call>'
    result = await parse_response("hermes_strict", text)
    assert result.calls == [
        FunctionCall(name="get_weather", arguments='{"city": "Paris"}', tool_call_id="call_0"),
        FunctionCall(name="get_time", arguments='{"tz": "CET"}', tool_call_id="call_1"),
    ]
    assert (result.content, result.errors) == ("", [])


async def test_malformed_json(parse_response) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'
    assert await parse_response("hermes_strict", text) == ParseResult(
        content=text,
        errors=[
            "Tool call 1 is not valid JSON: Expecting ',' delimiter at char 54 "
            f'(the end: a closing }}, ] or " is missing). {WRITE}'
        ],
    )


async def test_each_problem_is_numbered_and_valid_calls_still_run(parse_response) -> None:
    text = (
        "Several tries.\n"
        '<tool_call>{"name": "get_time"}</tool_call>\n'
        '<tool_call>{"arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": "verl"}</tool_call>\n'
        '<tool_call>["search", {"query": "verl"}]</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"query": "verl"}}'
    )
    result = await parse_response("hermes_strict", text)
    assert result.calls == [FunctionCall(name="get_time", arguments="{}", tool_call_id="call_0")]
    assert result.errors == [
        f'Tool call 2 has no "name". {WRITE}',
        f'Tool call 3: "arguments" must be a JSON object, got a string. {WRITE}',
        f"Tool call 4 must be a JSON object, got a list. {WRITE}",
        f"Tool call 5 has no closing </tool_call> tag. {WRITE}",
    ]
    assert result.content == text.replace('<tool_call>{"name": "get_time"}</tool_call>', "")


async def test_plain_text_and_bare_json_are_not_calls(parse_response) -> None:
    text = 'No tags here: {"name": "search", "arguments": {}}'
    assert await parse_response("hermes_strict", text) == ParseResult(content=text)


async def test_verl_interface_returns_content_and_calls(qwen_tokenizer: Any) -> None:
    parser = ToolParser.get_tool_parser("hermes_strict", qwen_tokenizer)
    ids = qwen_tokenizer.encode(f"Checking.\n{WEATHER}<|im_end|><|endoftext|><|endoftext|>", add_special_tokens=False)
    assert await parser.extract_tool_calls(ids, tools=[]) == (
        "Checking.",
        [FunctionCall(name="get_weather", arguments='{"city": "Paris"}', tool_call_id="call_0")],
    )
