"""The loop's side of code-fence tool calls (``extensions/code_fence.py``): the turn, caps, execution, records.

``fenced_reply`` is one assistant turn of ``LongWorkflowAgent`` when its ``tool_parser`` is
``code_fence``: generation pauses at closing fences, a closed block in a configured language runs,
its output block is appended (mask 0) and generation resumes in the same turn.

A closed block runs unless a cap is reached or the same code already ran in the trajectory
(``refusal``); then its output block says "Not run: ..." (mask 0), so the model never has to
invent one, and a model that repeats itself is told so instead of getting the same output again.
Each function works on the trajectory's ``Episode`` and its tool session.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from extensions.code_fence import (
    Block,
    CodeFenceSettings,
    call_arguments,
    invented_outputs,
    output_block,
    trailing_call,
)
from extensions.context_budget import append_tokens
from extensions.episode import Episode, context_anchor, count_outcomes
from extensions.errors import ConfigError, choices
from extensions.loop_settings import LoopSettings
from extensions.records_schema import Reason
from extensions.time_budget import over_time
from extensions.token_text import truncate_to_tokens
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


REPEATED_MESSAGE = "Not run: this exact code already ran above; its output will not change."
"""The output block of a block that repeats code that already ran (``refusal``)."""


def refusal(episode: Episode, fence: CodeFenceSettings, code: str) -> tuple[str, str] | None:
    """``(kind, message)`` when a closed block is not run — ``repeated`` (the same code already ran; checked first,
    so a loop past a cap is still counted as one) or ``limit`` (a cap is reached) — else None."""
    if code.strip() in episode.code_run:
        return "repeated", REPEATED_MESSAGE
    executed_here = sum(1 for call in episode.code_calls if call["executed"])
    if executed_here >= fence.max_calls_per_turn:
        return "limit", f"Not run: at most {fence.max_calls_per_turn} code executions per turn."
    if episode.num_executed_calls >= fence.max_calls_per_trajectory:
        return "limit", f"Not run: at most {fence.max_calls_per_trajectory} code executions per conversation."
    return None


def count_refusal(episode: Episode, fence: CodeFenceSettings, kind: str) -> None:
    """Count a ``repeated`` refusal; the ``end_after_repeats``-th ends the trajectory (``repeat_loop``) right after
    the refusal: inside a turn, after its output block; for a block that ends the turn, before the tool round.
    Repeats count over the whole trajectory, a folding loop's segments included (each fold forgets ``code_run``)."""
    if kind != "repeated":
        return
    episode.num_repeated_blocks += 1
    if fence.end_after_repeats is not None and episode.num_repeated_blocks >= fence.end_after_repeats:
        detail = f"{episode.num_repeated_blocks} blocks repeated code that already ran; end_after_repeats is "
        episode.ending = episode.ending or (Reason.REPEAT_LOOP, detail + str(fence.end_after_repeats))


async def run_block(episode: Episode, fence: CodeFenceSettings, code: str) -> ToolOutcome:
    """Run one block's code with the configured tool, or refuse it (``refusal``): the outcome says which."""
    arguments = call_arguments(fence, code)
    refused = refusal(episode, fence, code)
    if refused is not None:
        kind, message = refused
        count_refusal(episode, fence, kind)
        return ToolOutcome(fence.tool, arguments, message, error=kind)
    episode.code_run.add(code.strip())
    outcome = await episode.tool_session.call(fence.tool, arguments, episode)
    forget_failed_calls(episode, fence, [outcome])
    return outcome


def forget_failed_calls(episode: Episode, fence: CodeFenceSettings, outcomes: list[ToolOutcome]) -> None:
    """A call that failed as a call (timed out, raised) showed no output of the code: running it again is a retry,
    not a repeat. (Code that ran and failed, a traceback or its own time limit, keeps its place in ``code_run``.)"""
    for outcome in outcomes:
        if outcome.name == fence.tool and outcome.error not in (None, "repeated", "limit"):
            episode.code_run.discard(block_code(outcome.arguments, fence))


def block_code(arguments: str, fence: CodeFenceSettings) -> str:
    """The stripped code of a call's JSON ``arguments`` ("" when they are not a JSON object)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return ""
    return str(parsed.get(fence.argument, "")).strip() if isinstance(parsed, dict) else ""


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
        code = block_code(call.arguments, fence)
        refused = refusal(episode, fence, code)
        if refused is None:
            episode.tool_calls.append(call)
            episode.code_run.add(code)
        else:
            count_refusal(episode, fence, refused[0])
            episode.parse_errors.append(refused[1])


# -- one fenced turn -----------------------------------------------------------------------

NO_ROOM = "no room left for a code block's output"


class FenceLoop(Protocol):
    """What a fenced turn uses of its loop (``LongWorkflowAgent``; a folding loop overrides the budget)."""

    fence: CodeFenceSettings
    settings: LoopSettings
    tokenizer: Any
    tool_parser: Any
    end_ids: frozenset[int]

    async def _generate(self, episode: Episode, sampling_params: dict[str, Any], *, stop: bool = False) -> Any: ...

    def _generation_budget(self, episode: Episode) -> int: ...

    def _room(self, episode: Episode) -> int: ...


def keep_pausing(fence: CodeFenceSettings, pauses: int) -> bool:
    """Stop at closing fences (a block past a cap is answered "Not run", never left to be invented)
    until the turn has paused absurdly often."""
    return pauses < 4 * (fence.max_calls_per_turn + 2)


async def fenced_reply(loop: FenceLoop, episode: Episode, sampling_params: dict[str, Any]) -> list[int]:
    """One assistant turn's tokens, blocks run as they close (the module docstring of ``code_fence.py``).

    A pause at a closing fence whose block is a call runs it and appends its output (mask 0);
    a pause at any other fence resumes. The turn ends at an end token or when the budget is spent.
    """
    output = await loop._generate(episode, sampling_params, stop=keep_pausing(loop.fence, 0))
    token_ids, pending, pauses = list(output.token_ids), list(output.token_ids), 0
    while token_ids[-1] not in loop.end_ids:
        if loop._generation_budget(episode) <= 0:
            break
        pauses += 1
        text = loop.tool_parser.decode(pending)
        block = trailing_call(text, loop.fence.languages)
        if block is not None:
            episode.num_invented_outputs += invented_outputs(text)
            inserted = await run_inline(loop, episode, block, text)
            if inserted is None:
                return token_ids
            token_ids, pending = token_ids + inserted, []
            if episode.ending is None and (late := over_time(episode, loop.settings.max_trajectory_s)) is not None:
                episode.ending = (Reason.TIME_BUDGET, late)
            if episode.ending is not None:  # the generating state ends the trajectory
                return token_ids
        output = await loop._generate(episode, sampling_params, stop=keep_pausing(loop.fence, pauses))
        token_ids, pending = token_ids + output.token_ids, pending + output.token_ids
    episode.num_invented_outputs += invented_outputs(loop.tool_parser.decode(pending))
    return token_ids


async def run_inline(loop: FenceLoop, episode: Episode, block: Block, text: str) -> list[int] | None:
    """Run one closed block and append its output block (mask 0); None if it does not fit.

    Not even an empty output block fits: the code is not run. Its output does not fit: the code ran,
    but the model never sees it, so it is not recorded as run (``code_run``) and may run again.
    The turn then ends (``episode.out_of_room``); the generating state hands it on.
    """
    start, tokenizer, fence = len(episode.response_mask), loop.tokenizer, loop.fence
    empty = tokenizer.encode(output_block("", after=text), add_special_tokens=False)
    if len(empty) > loop._room(episode):
        episode.out_of_room = NO_ROOM
        return None
    outcome = await run_block(episode, fence, block.code)
    result = truncate_to_tokens(tokenizer, outcome.text, fence.max_output_tokens)
    ids = tokenizer.encode(output_block(result, after=text), add_special_tokens=False)
    if len(ids) > loop._room(episode):
        episode.code_run.discard(block.code.strip())
        episode.out_of_room = NO_ROOM
        return None
    append_tokens(episode, ids)
    record_inline_call(episode, outcome, start)
    return ids
