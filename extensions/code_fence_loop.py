"""The loop's side of code-fence tool calls (``extensions/code_fence.py``): caps, execution, records.

A closed block runs unless a cap is reached or the same code already ran in the trajectory
(``refusal``); then its output block says "Not run: ..." (mask 0), so the model never has to
invent one, and a model that repeats itself is told so instead of getting the same output again.

``LongWorkflowAgent`` calls these from its generating state when its ``tool_parser`` is
``code_fence``; each works on the trajectory's ``Episode`` and its tool session.
"""

from __future__ import annotations

import json
from typing import Any

from extensions.code_fence import CodeFenceSettings, call_arguments
from extensions.episode import Episode, context_anchor, count_outcomes
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


def refusal(episode: Episode, fence: CodeFenceSettings, code: str) -> tuple[str, str] | None:
    """``(kind, message)`` when a closed block is not run — ``limit`` (a cap is reached) or ``repeated``
    (the same code already ran) — else None."""
    executed_here = sum(1 for call in episode.code_calls if call["executed"])
    if executed_here >= fence.max_calls_per_turn:
        return "limit", f"Not run: at most {fence.max_calls_per_turn} code executions per turn."
    if episode.num_executed_calls >= fence.max_calls_per_trajectory:
        return "limit", f"Not run: at most {fence.max_calls_per_trajectory} code executions per conversation."
    if code.strip() in episode.code_run:
        return "repeated", "Not run: this exact code already ran above; its output will not change."
    return None


async def run_block(episode: Episode, fence: CodeFenceSettings, code: str) -> ToolOutcome:
    """Run one block's code with the configured tool, or refuse it (``refusal``): the outcome says which."""
    arguments = call_arguments(fence, code)
    refused = refusal(episode, fence, code)
    if refused is not None:
        kind, message = refused
        return ToolOutcome(fence.tool, arguments, message, error=kind)
    episode.code_run.add(code.strip())
    return await episode.tool_session.call(fence.tool, arguments, episode)


def append_tokens(episode: Episode, token_ids: list[int]) -> None:
    """Append context tokens (mask 0, log-prob 0) to the running stream."""
    episode.prompt_ids = episode.prompt_ids + token_ids
    episode.response_mask = episode.response_mask + [0] * len(token_ids)
    if episode.response_logprobs:
        episode.response_logprobs = episode.response_logprobs + [0.0] * len(token_ids)


def record_inline_call(episode: Episode, outcome: ToolOutcome, start: int) -> None:
    """Count a block run inside the turn; its output is ``response[start:]``, and ``anchor`` fingerprints
    the context the turn's next step starts from (gigpo_turn's step groups)."""
    span = [start, len(episode.response_mask)]
    episode.code_calls.append({**outcome.record(), "span": span, "anchor": context_anchor(episode.prompt_ids)})
    count_outcomes(episode, [outcome])


def refuse_trailing_calls(episode: Episode, fence: CodeFenceSettings) -> None:
    """A block that ends the turn and may not run (``refusal``) becomes a message saying why."""
    calls, episode.tool_calls = episode.tool_calls, []
    for call in calls:
        code = str(json.loads(call.arguments).get(fence.argument, ""))
        refused = refusal(episode, fence, code)
        if refused is None:
            episode.tool_calls.append(call)
            episode.code_run.add(code.strip())
        else:
            episode.parse_errors.append(refused[1])
