"""The ``react`` parser: Thought / Action / Action Input, and Final Answer."""

from __future__ import annotations

from verl.experimental.agent_loop.tool_parser import FunctionCall

from extensions.parsers import ParseResult

WRITE = "Write Action: <tool> on one line, then Action Input: {...} (a JSON object) on the next."


async def test_single_action(parse_response) -> None:
    text = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
    assert await parse_response("react", text) == ParseResult(
        content="Thought: I need the weather.",
        calls=[FunctionCall(name="get_weather", arguments='{"city": "Paris"}', tool_call_id="call_0")],
    )


async def test_several_actions_multiline_input_and_quoted_name(parse_response) -> None:
    text = (
        "Thought: two lookups.\n"
        'Action: search\nAction Input: {"query": "verl"}\n'
        "Thought: and the second.\n"
        'Action: `search`\nAction Input: {\n  "query": "ray",\n  "top_k": 3\n}'
    )
    assert await parse_response("react", text) == ParseResult(
        content="Thought: two lookups.\n\nThought: and the second.",
        calls=[
            FunctionCall(name="search", arguments='{"query": "verl"}', tool_call_id="call_0"),
            FunctionCall(name="search", arguments='{"query": "ray", "top_k": 3}', tool_call_id="call_1"),
        ],
    )


async def test_final_answer_means_no_call(parse_response) -> None:
    text = 'Thought: I know it.\nAction: search\nAction Input: {"query": "x"}\nFinal Answer: 42'
    assert await parse_response("react", text) == ParseResult(content=text)


async def test_malformed_actions(parse_response) -> None:
    text = (
        "Action: get_weather\nAction Input: city=Paris\n"
        "Action: get_time\n"
        'Action:\nAction Input: {"x": 1}\n'
        'Action: search\nAction Input: ["verl"]'
    )
    result = await parse_response("react", text)
    assert result.errors == [
        f"Tool call 1 is not valid JSON: Expecting value at char 0. {WRITE}",
        f'Tool call 2 has no "Action Input:" line. {WRITE}',
        f'Tool call 3 has no tool name after "Action:". {WRITE}',
        f'Tool call 4: "Action Input" must be a JSON object, got a list. {WRITE}',
    ]
    assert (result.content, result.calls) == (text, [])


async def test_plain_text_has_no_calls(parse_response) -> None:
    text = "Thought: nothing to do.\nThe answer is 4."
    assert await parse_response("react", text) == ParseResult(content=text)
