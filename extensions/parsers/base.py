"""The shared half of every tool-call parser: decode, hide thinking, number calls, report errors.

verl's parsers answer ``(content, calls)`` and log malformed calls away. A
``DetailedToolParser`` also answers *what was wrong*, as short model-facing messages, so the
agent loop can tell the model and count format errors::

    parser = ToolParser.get_tool_parser("auto", tokenizer)
    result = await parser.extract_tool_calls_detailed(response_ids, tools)
    result.calls, result.errors  # [FunctionCall(name=..., arguments='{"city": "Paris"}', ...)], []

A subclass only implements ``scan``: find the call attempts of its format in text whose
thinking is blanked out. ``parse`` does the rest, the same way for every format:

1. blank out the reply's thinking (``extensions/thinking.py``: the one rule the token mask also
   uses), keeping every offset, so calls written while thinking are never executed (verl #4757);
2. number the attempts in text order; a valid one becomes a ``FunctionCall`` with its
   arguments as a JSON object string and id ``call_<k>``, a malformed one an error message;
3. ``content`` is the text minus the executed calls, stripped; thinking and malformed
   attempts stay in it, since that is what the model wrote.
"""

from __future__ import annotations

import asyncio
import json
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
from verl.tools.schemas import OpenAIFunctionToolSchema
from verl.utils.rollout_trace import rollout_trace_op

from extensions.thinking import THINK_CLOSE, THINK_OPEN, blank_spans, thinking_spans

# Markup the formats need even where a tokenizer marks it special; never stripped on decode.
MARKUP_TOKENS = frozenset({"<tool_call>", "</tool_call>", THINK_OPEN, THINK_CLOSE})


class ParseResult(BaseModel):
    """What one assistant turn holds: its text, the calls to run and the malformed ones."""

    content: str
    """The decoded text minus the executed tool calls, stripped; thinking is kept."""

    calls: list[FunctionCall] = Field(default_factory=list)
    """Valid calls in text order; ``arguments`` is a JSON object string, ids are ``call_0``..."""

    errors: list[str] = Field(default_factory=list)
    """One model-facing message per malformed call, e.g. ``Tool call 2 has no "name". Write ...``."""


@dataclass(frozen=True)
class Attempt:
    """One tool call the model tried to write, found by a format's ``scan``.

    An attempt is valid when ``problem`` is None; else ``problem`` continues
    the sentence ``Tool call <n>``, e.g. ``' has no "name"'`` or ``': "arguments" must be ...'``.
    Attempts that share a span (the items of one JSON list) are removed from the content only
    when all of them are valid.
    """

    start: int
    end: int
    example: str
    name: str = ""
    arguments: dict[str, Any] | None = None
    problem: str | None = None


def remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the (sorted, non-overlapping) ``spans``."""
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(text[position:start])
        position = end
    return "".join([*pieces, text[position:]])


def build_result(text: str, attempts: list[Attempt]) -> ParseResult:
    """Steps 2 and 3 of the module docstring: number attempts, make calls, errors and content."""
    calls: list[FunctionCall] = []
    errors: list[str] = []
    executed: set[tuple[int, int]] = set()
    kept: set[tuple[int, int]] = set()
    for number, attempt in enumerate(sorted(attempts, key=lambda a: a.start), start=1):
        if attempt.problem is not None:
            errors.append(f"Tool call {number}{attempt.problem}. Write {attempt.example}.")
            kept.add((attempt.start, attempt.end))
            continue
        arguments = json.dumps(attempt.arguments or {}, ensure_ascii=False)
        calls.append(FunctionCall(name=attempt.name, arguments=arguments, tool_call_id=f"call_{len(calls)}"))
        executed.add((attempt.start, attempt.end))
    content = remove_spans(text, sorted(executed - kept)).strip()
    return ParseResult(content=content, calls=calls, errors=errors)


def control_tokens(tokenizer: Any) -> list[str]:
    """The tokenizer's special tokens (``<|im_end|>``, ``<|endoftext|>``...) minus format markup."""
    tokens = {tok.content for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values() if tok.special}
    tokens.update(getattr(tokenizer, "all_special_tokens", None) or [])
    return sorted((tok for tok in tokens - MARKUP_TOKENS if tok), key=len, reverse=True)


class DetailedToolParser(ToolParser):
    """A verl ``ToolParser`` that also reports malformed calls; subclasses implement ``scan``."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        self.control_tokens = control_tokens(tokenizer)

    @abstractmethod
    def scan(self, visible: str) -> list[Attempt]:
        """Find this format's call attempts in ``visible`` (thinking already blanked out)."""

    def parse(self, text: str) -> ParseResult:
        """Parse decoded assistant text; pure and synchronous."""
        visible = blank_spans(text, thinking_spans(text))
        return build_result(text, self.scan(visible))

    def decode(self, responses_ids: list[int]) -> str:
        """Token ids to text, keeping markup tokens and dropping control tokens."""
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=False)
        for token in self.control_tokens:
            text = text.replace(token, "")
        return text

    @rollout_trace_op
    async def extract_tool_calls_detailed(
        self, responses_ids: list[int], tools: list[OpenAIFunctionToolSchema] | None = None
    ) -> ParseResult:
        """Decode and parse off the event loop; ``tools`` is unused (the tool layer checks names)."""
        del tools
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self.parse(self.decode(responses_ids)))

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: list[OpenAIFunctionToolSchema] | None = None
    ) -> tuple[str, list[FunctionCall]]:
        """verl's interface: ``(content, calls)``, with the errors dropped."""
        result = await self.extract_tool_calls_detailed(responses_ids, tools)
        return result.content, result.calls
