"""Fitting tool results and user messages into the response budget.

verl's ToolAgentLoop runs a tool, renders its result, and drops it if it overflows
``response_length``. We check the room before running tools and shrink results (by
tokens, not characters) so that what ran is always shown, and a reserve of
``reserve_final_tokens`` stays free for the model's last answer.
"""

from __future__ import annotations

import json
import threading
from typing import Any

TRUNCATION_NOTE = "\n...(truncated to fit the response budget)"
CHARS_PER_TOKEN_BOUND = 32
"""Text beyond ``max_tokens * 32`` characters is cut before tokenising (then cut by tokens)."""
MIN_RESULT_TOKENS = 8
"""A tool round is only started if each result can keep at least this many tokens."""


def truncate_to_tokens(tokenizer: Any, text: str, max_tokens: int) -> str:
    """Keep the head of ``text`` so that it plus the note is at most ``max_tokens`` tokens."""
    if len(text.encode("utf-8")) <= max_tokens:  # a token is at least one byte (not one character)
        return text
    head = text[: max_tokens * CHARS_PER_TOKEN_BOUND]  # never tokenise megabytes to keep a few tokens
    ids = tokenizer.encode(head, add_special_tokens=False)
    if len(ids) <= max_tokens and len(head) == len(text):
        return text
    note_len = len(tokenizer.encode(TRUNCATION_NOTE, add_special_tokens=False))
    keep = max(0, max_tokens - note_len)
    return tokenizer.decode(ids[:keep]) + TRUNCATION_NOTE


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


SYNTHETIC_SYSTEM = "continuous token synthetic system"
"""verl's Continuous Token renders appended messages after a synthetic prefix that starts with this."""
PREFIX_IDS: dict[tuple, list[int]] = {}
PREFIX_CACHE_SIZE = 256
_PREFIX_LOCK = threading.Lock()  # verl runs the merges in a thread pool


def cache_prefix_renders(builder: Any) -> Any:
    """Tokenize verl's synthetic Continuous Token prefix once, not at every tool round and user turn.

    ``render_delta_token_id`` renders ``prefix`` and ``prefix + appended`` with the chat template
    (tools included) and keeps the difference. For tool and user messages the prefix is a fixed
    synthetic conversation, so its token ids are cached per (tokenizer, builder, prefix, tools).
    Other prefixes (e.g. the whole history for templates without a fused generation prompt)
    take verl's path unchanged.
    """
    original = builder.render_delta_token_id

    def render_delta_token_id(prefix_messages, appended_messages, *, add_generation_prompt=False, tools=None):
        if not prefix_messages or prefix_messages[0].get("content") != SYNTHETIC_SYSTEM:
            return original(
                prefix_messages, appended_messages, add_generation_prompt=add_generation_prompt, tools=tools
            )
        key = (id(builder.tokenizer), type(builder), json.dumps([prefix_messages, tools], sort_keys=True, default=str))
        prefix_ids = PREFIX_IDS.get(key)
        if prefix_ids is None:
            prefix_ids = builder._render_tokens(prefix_messages, add_generation_prompt=False, tools=tools)
            with _PREFIX_LOCK:
                if len(PREFIX_IDS) >= PREFIX_CACHE_SIZE:  # oldest first; tool-call ids can make many prefixes
                    PREFIX_IDS.pop(next(iter(PREFIX_IDS)))
                PREFIX_IDS[key] = prefix_ids
        full_ids = builder._render_tokens(
            prefix_messages + appended_messages, add_generation_prompt=add_generation_prompt, tools=tools
        )
        if full_ids[: len(prefix_ids)] != prefix_ids:
            roles = [m.get("role") for m in appended_messages] or ["generation_prompt"]
            raise ValueError(f"Continuous Token token-id suffix diff failed for roles: {roles}")
        return full_ids[len(prefix_ids) :]

    builder.render_delta_token_id = render_delta_token_id
    return builder
