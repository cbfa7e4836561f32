"""Fitting tool results and user messages into the response budget.

verl's ToolAgentLoop runs a tool, renders its result, and drops it if it overflows
``response_length``. We check the room before running tools and shrink results (by
tokens, not characters) so that what ran is always shown, and a reserve of
``reserve_final_tokens`` stays free for the model's last answer.
"""

from __future__ import annotations

from typing import Any

TRUNCATION_NOTE = "\n...(truncated to fit the response budget)"
CHARS_PER_TOKEN_BOUND = 32
"""Text beyond ``max_tokens * 32`` characters is cut before tokenising (then cut by tokens)."""
MIN_RESULT_TOKENS = 8
"""A tool round is only started if each result can keep at least this many tokens."""


def truncate_to_tokens(tokenizer: Any, text: str, max_tokens: int) -> str:
    """Keep the head of ``text`` so that it plus the note is at most ``max_tokens`` tokens."""
    if len(text) <= max_tokens:  # a token is at least one character
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
