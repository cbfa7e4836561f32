"""One assistant turn's server call and parse, as plain functions of ``LongWorkflowAgent``'s generating state.

- ``tool_parser_for`` / ``masked_think_ids``: what the loop's entry picks, checked once when the loop is built;
- ``request_params``: the sampling parameters of one server call (budget, stop tokens, the code-fence pause);
- ``generate_reply``: the server call; ``merge_reply``: its reply appended to the running stream exactly
  as generated (mask 1; ``<think>`` 0 when thinking is not in the loss);
- ``parse_turn``: the turn's text, tool calls and malformed calls.

A code-fence turn makes several server calls in one turn (``extensions/code_fence_loop.py``), each one
``request_params`` + ``generate_reply``; a fold's summary request is one more (``extensions/folding_loop.py``).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.profiler import simple_timer

from extensions.code_fence import STOP_STRINGS
from extensions.episode import Episode, absorb_generation, mask_thinking, think_token_ids
from extensions.errors import ConfigError, choices
from extensions.verl_compat import tool_parser_registry


def tool_parser_for(name: str, tokenizer: Any, *, entry: str) -> Any:
    """verl's ``ToolParser`` registered as ``name`` (the entry's ``tool_parser``); an unknown name is a ConfigError."""
    registry = tool_parser_registry()
    if name not in registry:
        raise ConfigError(f"agent loop {entry!r}: tool_parser {name!r} is not registered; valid: {choices(registry)}")
    return ToolParser.get_tool_parser(name, tokenizer)


def masked_think_ids(tokenizer: Any, thinking_in_loss: bool, *, entry: str) -> tuple[int, int] | None:
    """The ``<think>``/``</think>`` ids whose blocks ``merge_reply`` masks out: None with ``thinking_in_loss``.

    ``thinking_in_loss: false`` needs both to be single tokens of the tokenizer (else a ConfigError).
    """
    ids = think_token_ids(tokenizer)
    if ids is None and not thinking_in_loss:
        raise ConfigError(
            f"agent loop {entry!r}: thinking_in_loss: false needs <think> and </think> "
            "to be single tokens of the tokenizer; this tokenizer has no such tokens"
        )
    return None if thinking_in_loss else ids


def request_params(
    sampling_params: dict[str, Any], max_tokens: int, *, pause_at_fences: bool, stop_token_ids: list[int] | None
) -> dict[str, Any]:
    """One server call's sampling parameters: ``max_tokens`` (the budget left, or less), the code-fence stop
    strings when the turn pauses at closing fences, and the parser's stop tokens, each added to the run's own."""
    params = {**sampling_params, "max_tokens": max_tokens}
    if pause_at_fences:
        params["stop"] = sorted(set(params.get("stop") or []) | set(STOP_STRINGS))
    if stop_token_ids:
        params["stop_token_ids"] = sorted(set(params.get("stop_token_ids") or []) | set(stop_token_ids))
    return params


async def generate_reply(
    server_manager: Any, episode: Episode, params: dict[str, Any], merge: Any, think_ids: tuple[int, int] | None
) -> Any:
    """One server call on the running stream (timed as ``generate_sequences``), its reply merged into it
    (``merge_reply``); the reply's ``num_preempted`` and extra fields join the trajectory's. An empty reply raises."""
    with simple_timer("generate_sequences", episode.metrics):
        output = await server_manager.generate(
            request_id=episode.request_id, prompt_ids=episode.prompt_ids, sampling_params=params
        )
    absorb_generation(episode, output)
    if not output.token_ids:
        raise RuntimeError("the server returned an empty response (0 tokens)")
    await merge_reply(episode, output, merge, think_ids)
    return output


async def merge_reply(episode: Episode, output: Any, merge: Any, think_ids: tuple[int, int] | None) -> None:
    """Append a server reply's tokens exactly as generated (mask 1; the ``<think>`` blocks 0 when ``think_ids``).

    ``merge`` is the loop's ``ct_merge_assistant_token`` (verl's Continuous Token merge); log-probs are
    kept once any reply of the trajectory had them.
    """
    episode.response_ids = output.token_ids
    use_logprobs = bool(episode.response_logprobs or output.log_probs)
    merged, mask, logprobs = await merge(
        episode.prompt_ids,
        output.token_ids,
        episode.response_mask,
        episode.response_logprobs if use_logprobs else None,
        assistant_logprobs=output.log_probs or None,
    )
    if think_ids:
        mask_thinking(mask, output.token_ids, think_ids)
    episode.prompt_ids, episode.response_mask = merged.token_ids, mask
    if logprobs is not None:
        episode.response_logprobs = logprobs


async def parse_turn(tool_parser: Any, token_ids: list[int], tools: dict[str, Any]) -> tuple[str, list[Any], list[str]]:
    """(content, calls, errors) of a turn's tokens: the pack's parsers report malformed calls; verl's report none."""
    detailed = getattr(tool_parser, "extract_tool_calls_detailed", None)
    schemas = [t.tool_schema for t in tools.values()]
    if detailed is not None:
        result = await detailed(token_ids, schemas)
        return result.content, list(result.calls), list(result.errors)
    content, calls = await tool_parser.extract_tool_calls(token_ids, schemas)
    return content, list(calls), []
