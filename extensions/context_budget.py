"""Fitting tool results and user messages into the response budget.

verl's ToolAgentLoop runs a tool, renders its result, and drops it if it overflows
``response_length``. We check the room before running tools (``fits``) and shrink results
(by tokens, not characters) until they fit (``append_context``), so that what ran is always
shown, and a reserve of ``reserve_final_tokens`` stays free for the model's last answer.

``fits`` and ``append_context`` take the loop's ``ct_merge_context_msg`` (verl's Continuous
Token merge of context messages, mask 0) as ``merge``; ``room`` is ``response_length`` minus
the tokens used minus the reserve. Used by ``LongWorkflowAgent`` (extensions/custom_rollouts.py).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from extensions.token_text import truncate_to_tokens

if TYPE_CHECKING:
    from extensions.episode import Episode

MergeContext = Callable[..., Awaitable[tuple[Any, list[int], list[float] | None]]]
"""``ToolAgentLoop.ct_merge_context_msg``: (previous, updated, token_ids, mask, logprobs, tools=) -> merge, mask, logprobs."""

MIN_RESULT_TOKENS = 8
"""A tool round is only started if each result can keep at least this many tokens."""
FRAMING_BOUND = 128
"""Upper bound on the tokens a chat template adds around one context message."""


def shrink_messages(tokenizer: Any, messages: list[dict[str, Any]], overflow: int) -> list[dict[str, Any]]:
    """Cut ``overflow`` (plus slack for re-tokenisation) tokens from the longest contents first."""
    sized = [(len(tokenizer.encode(m["content"], add_special_tokens=False)), i) for i, m in enumerate(messages)]
    budget = {i: n for n, i in sized}
    to_cut = overflow + 4 * len(messages)
    for n, i in sorted(sized, reverse=True):
        if to_cut <= 0:
            break
        cut = min(to_cut, max(0, n - MIN_RESULT_TOKENS))
        budget[i] = n - cut
        to_cut -= cut
    return [
        {**m, "content": truncate_to_tokens(tokenizer, m["content"], budget[i])} if budget[i] < sized[i][0] else m
        for i, m in enumerate(messages)
    ]


def room_left(episode: Episode, response_length: int, reserve_final_tokens: int) -> int:
    """Response tokens still free for context messages (the final-answer reserve kept)."""
    return response_length - len(episode.response_mask) - reserve_final_tokens


async def fits(merge: MergeContext, episode: Episode, messages: list[dict[str, Any]], *, room: int) -> bool:
    """Would ``messages``, each grown by ``MIN_RESULT_TOKENS`` tokens, fit in ``room``?

    Asked with empty tool messages before a tool round runs. Rendering costs as much as
    appending, so it is skipped when the room is far larger than any chat template's framing
    of ``messages`` (``FRAMING_BOUND`` tokens per message).
    """
    extra = MIN_RESULT_TOKENS * len(messages)
    if room >= extra + FRAMING_BOUND * (len(messages) + 1):
        return True
    _, mask, _ = await merge(
        episode.messages,
        episode.messages + messages,
        episode.prompt_ids,
        episode.response_mask,
        None,
        tools=episode.schemas,
    )
    return len(mask) - len(episode.response_mask) + extra <= room


async def append_context(
    merge: MergeContext, tokenizer: Any, episode: Episode, messages: list[dict[str, Any]], *, room: int, shrink: bool
) -> bool:
    """Append context messages (mask 0) within ``room``; shrink them by tokens until they fit.

    Without ``shrink``, messages that do not fit are not appended and False is returned.
    """
    for _attempt in range(4):
        merged, mask, logprobs = await merge(
            episode.messages,
            episode.messages + messages,
            episode.prompt_ids,
            episode.response_mask,
            episode.response_logprobs or None,
            tools=episode.schemas,
        )
        overflow = len(mask) - len(episode.response_mask) - room
        if overflow <= 0:
            break
        if not shrink:
            return False
        messages = shrink_messages(tokenizer, messages, overflow)
    episode.messages.extend(messages)
    episode.prompt_ids, episode.response_mask = merged.token_ids, mask
    if episode.response_logprobs:
        episode.response_logprobs = logprobs or []
    return True


def append_tokens(episode: Episode, token_ids: list[int]) -> None:
    """Append context tokens already rendered (mask 0, log-prob 0): a code block's output, a fold's framing."""
    episode.prompt_ids = episode.prompt_ids + token_ids
    episode.response_mask = episode.response_mask + [0] * len(token_ids)
    if episode.response_logprobs:
        episode.response_logprobs = episode.response_logprobs + [0.0] * len(token_ids)


PREFIX_IDS: dict[tuple, list[int]] = {}
"""Token ids of verl's synthetic Continuous Token prefixes (``verl_compat.cache_prefix_renders``)."""
PREFIX_CACHE_SIZE = 256
_PREFIX_LOCK = threading.Lock()  # verl runs the merges in a thread pool


def cache_prefix_renders(builder: Any) -> Any:
    """Tokenize verl's synthetic Continuous Token prefix once (see ``verl_compat.cache_prefix_renders``)."""
    from extensions.verl_compat import cache_prefix_renders as patch

    return patch(builder, PREFIX_IDS, _PREFIX_LOCK, PREFIX_CACHE_SIZE)
