"""The loop's side of code-fence tool calls (``extensions/code_fence.py``): caps, execution, records.

``LongWorkflowAgent`` calls these from its generating state when its ``tool_parser`` is
``code_fence``; each works on the trajectory's ``Episode`` and its tool session.
"""

from __future__ import annotations

from typing import Any

from extensions.code_fence import CodeFenceSettings, call_arguments
from extensions.episode import Episode, count_outcomes
from extensions.errors import ConfigError, choices
from extensions.loop_settings import LoopSettings
from extensions.tool_session import ToolOutcome

END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def code_fence_settings(
    settings: LoopSettings, parser_name: str | None, entry: str, tools: dict[str, Any]
) -> CodeFenceSettings | None:
    """The entry's code-fence settings when its format is ``code_fence``, else None; mismatches are ConfigErrors."""
    if parser_name != "code_fence":
        if settings.code_fence is not None:
            raise ConfigError(
                f"agent loop {entry!r}: 'code_fence' settings need tool_parser: code_fence (format is {parser_name!r})"
            )
        return None
    fence = settings.code_fence or CodeFenceSettings()
    if fence.tool not in tools:
        raise ConfigError(
            f"agent loop {entry!r}: code_fence.tool {fence.tool!r} is not in the tool config; tools: {choices(tools)}"
        )
    return fence


def end_token_ids(tokenizer: Any) -> frozenset[int]:
    """Ids that end an assistant turn: the tokenizer's EOS and Qwen's end tokens, where it has them."""
    ids = {tokenizer.eos_token_id}
    for token in END_TOKENS:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id != tokenizer.unk_token_id:
            ids.add(token_id)
    return frozenset(i for i in ids if isinstance(i, int))


def inline_calls_left(data: Episode, fence: CodeFenceSettings | None) -> bool:
    """May the turn still pause at a closing fence to run a block (both caps not reached)?"""
    if fence is None:
        return False
    return len(data.code_calls) < fence.max_calls_per_turn and data.num_tool_calls < fence.max_calls_per_trajectory


async def run_block(data: Episode, fence: CodeFenceSettings, code: str) -> ToolOutcome:
    """Run one block's code with the configured tool through the trajectory's tool session."""
    return await data.tool_session.call(fence.tool, call_arguments(fence, code), data)


def append_tokens(data: Episode, token_ids: list[int]) -> None:
    """Append context tokens (mask 0, log-prob 0) to the running stream."""
    data.prompt_ids = data.prompt_ids + token_ids
    data.response_mask = data.response_mask + [0] * len(token_ids)
    if data.response_logprobs:
        data.response_logprobs = data.response_logprobs + [0.0] * len(token_ids)


def record_inline_call(data: Episode, outcome: ToolOutcome, start: int) -> None:
    """Count a block run inside the turn; its output is ``response[start:]``."""
    data.code_calls.append({**outcome.record(), "span": [start, len(data.response_mask)]})
    count_outcomes(data, [outcome])


def calls_over_cap(data: Episode, fence: CodeFenceSettings) -> None:
    """A trailing block past a cap is not run: it becomes a message saying so."""
    if not data.tool_calls:
        return
    if len(data.code_calls) >= fence.max_calls_per_turn:
        why = f"at most {fence.max_calls_per_turn} code executions per turn"
    elif data.num_tool_calls >= fence.max_calls_per_trajectory:
        why = f"at most {fence.max_calls_per_trajectory} code executions per conversation"
    else:
        return
    data.parse_errors += [f"Not run: {why}." for _ in data.tool_calls]
    data.tool_calls = []
