"""Cutting text to a number of tokens: a tool result, a code block's output (no pack imports)."""

from __future__ import annotations

from typing import Any

TRUNCATION_NOTE = "\n...(truncated to fit the response budget)"
CHARS_PER_TOKEN_BOUND = 32
"""Text beyond ``max_tokens * 32`` characters is cut before tokenising (then cut by tokens)."""


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
