"""Registration in verl's ``ToolParser`` registry, decoding, and call ids in verl's message flow."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from verl.experimental.agent_loop.tool_parser import HermesToolParser, ToolParser

import extensions.parsers
from extensions.parsers import DetailedToolParser, register_parsers
from extensions.verl_compat import build_assistant_message, required_tool_name, tool_parser_registry

NAMES = ["json", "react", "auto", "hermes_strict", "code_fence"]


def test_importing_the_package_registers_every_parser() -> None:
    for name in NAMES:
        assert tool_parser_registry()[name] is extensions.parsers.PARSERS[name]


def test_register_parsers_is_idempotent_and_leaves_verl_parsers_alone() -> None:
    before = dict(tool_parser_registry())
    assert register_parsers() == NAMES
    assert register_parsers() == NAMES
    assert tool_parser_registry() == before
    assert tool_parser_registry()["hermes"] is HermesToolParser


def test_decode_drops_control_tokens_and_keeps_markup(qwen_tokenizer: Any) -> None:
    parser = ToolParser.get_tool_parser("auto", qwen_tokenizer)
    assert isinstance(parser, DetailedToolParser)
    text = "<think>a</think>b<tool_call>c</tool_call><|im_end|><|endoftext|><|endoftext|>"
    assert (
        parser.decode(qwen_tokenizer.encode(text, add_special_tokens=False))
        == "<think>a</think>b<tool_call>c</tool_call>"
    )


async def test_call_ids_fit_verls_assistant_message_and_chat_template(parse_response, qwen_tokenizer: Any) -> None:
    text = (
        "Both.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    )
    result = await parse_response("hermes_strict", text)
    loop = SimpleNamespace(max_parallel_calls=8)
    assistant = build_assistant_message(loop, result.content, SimpleNamespace(tool_calls=result.calls))
    assert [(call["id"], call["function"]["name"]) for call in assistant["tool_calls"]] == [
        ("call_0", "get_weather"),
        ("call_1", "get_time"),
    ]
    # Continuous Token names each tool response by its id (listed out of order here), not by position.
    replies = [
        {"role": "tool", "content": "12:00", "tool_call_id": "call_1"},
        {"role": "tool", "tool_call_id": "call_0"},
    ]
    names = [required_tool_name(m, i, replies, [assistant]) for i, m in enumerate(replies)]
    assert names == ["get_time", "get_weather"]
    tool_messages = [
        {"role": "tool", "content": "sunny", "tool_call_id": "call_0"},
        {"role": "tool", "content": "12:00", "tool_call_id": "call_1"},
    ]
    # The Qwen2.5 template ignores ids and renders the calls exactly as the model wrote them.
    messages = [{"role": "user", "content": "Weather and time?"}, assistant, *tool_messages]
    rendered = qwen_tokenizer.apply_chat_template(messages, tokenize=False)
    assert f"<|im_start|>assistant\n{text}<|im_end|>" in rendered
    assert "call_0" not in rendered
