"""Where a reply's reasoning is: one rule for the parsers, the code-fence format and the token mask.

A reply's thinking is ``<think>...</think>``, tags included, with two edge cases:

- an unclosed ``<think>`` runs to the end of the reply;
- a ``</think>`` before any ``<think>`` closes reasoning that began in the prompt (chat templates
  that open ``<think>`` in the generation prompt), so everything up to it is thinking.

``thinking_spans`` applies the rule to text, ``token_thinking_spans`` to token ids; the two
agree whenever ``<think>`` and ``</think>`` are single tokens.
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
NOT_NEWLINE = re.compile(r"[^\n]")


def thinking_spans(text: str) -> list[tuple[int, int]]:
    """Half-open character spans of reasoning in ``text`` (the module docstring's rule)."""
    spans: list[tuple[int, int]] = []
    position = 0
    first_close, first_open = text.find(THINK_CLOSE), text.find(THINK_OPEN)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        position = first_close + len(THINK_CLOSE)
        spans.append((0, position))
    while (start := text.find(THINK_OPEN, position)) != -1:
        close = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        position = len(text) if close == -1 else close + len(THINK_CLOSE)
        spans.append((start, position))
    return spans


def token_thinking_spans(token_ids: list[int], open_id: int, close_id: int) -> list[tuple[int, int]]:
    """Half-open token spans of reasoning in ``token_ids``: the same rule as ``thinking_spans``."""
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    for i, tok in enumerate(token_ids):
        if tok == open_id and open_at is None:
            open_at = i
        elif tok == close_id and open_at is not None:
            spans.append((open_at, i + 1))
            open_at = None
        elif tok == close_id and not spans:  # reasoning that began in the prompt
            spans.append((0, i + 1))
    if open_at is not None:
        spans.append((open_at, len(token_ids)))
    return spans


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace every character in ``spans`` but newlines with a space; offsets stay valid."""
    pieces, position = [], 0
    for start, end in spans:
        pieces += [text[position:start], NOT_NEWLINE.sub(" ", text[start:end])]
        position = end
    return "".join([*pieces, text[position:]])


def visible_text(text: str) -> str:
    """``text`` with its thinking blanked out (offsets kept)."""
    return blank_spans(text, thinking_spans(text))
