"""Fixtures for the parser tests: one real Qwen2.5 tokenizer per session, built offline and cached."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from transformers import AutoTokenizer
from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers import ParseResult, register_parsers
from extensions.qwen_tokenizer import cached_qwen_model_dir

ParseResponse = Callable[[str, str], Awaitable[ParseResult]]


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    """Qwen2.5's tokenizer, loaded the way verl loads a model's (``<|im_end|>`` is a control token,
    ``<tool_call>`` and ``<think>`` are text); the first run builds it into the cache (~7 s)."""
    return AutoTokenizer.from_pretrained(cached_qwen_model_dir())


@pytest.fixture(scope="session")
def parse_response(qwen_tokenizer: Any) -> ParseResponse:
    """``await parse_response(parser_name, text)``: encode ``text`` + ``<|im_end|>`` as the model would
    have generated it, then run the registered parser on the ids, as the agent loop does."""
    register_parsers()
    im_end = qwen_tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def run(parser_name: str, text: str) -> ParseResult:
        ids = qwen_tokenizer.encode(text, add_special_tokens=False) + [im_end]
        parser = ToolParser.get_tool_parser(parser_name, qwen_tokenizer)
        return await parser.extract_tool_calls_detailed(ids, tools=[])

    return run
