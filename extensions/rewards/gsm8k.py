"""GSM8K answer extraction: strip thinking, then read the answer in strict or flexible mode.

- strict: the answer must be on its own ``#### N`` line (the format the system prompt asks
  for and GSM8K's references use); the last such line wins, and a ``####`` line whose
  content is not one number means "no answer".
- flexible: the last number anywhere in the (thinking-free) final answer.

Thinking is removed first, so a number that only appears inside ``<think>...</think>`` never
counts. An unclosed ``<think>`` hides everything after it (the model ran out of budget
mid-thought); a stray ``</think>`` with no opener hides everything before it (templates such
as Qwen3's open the think block in the prompt).
"""

from __future__ import annotations

import re
from typing import Literal

from extensions.rewards.numbers import normalize_number, numbers_equal

Mode = Literal["strict", "flexible"]
MODES: tuple[Mode, ...] = ("strict", "flexible")

OPENAI_GSM8K = "openai/gsm8k"
"""verl's own name for GSM8K rows (its examples' preprocessing writes it)."""
LONGFLOW_GSM8K = "longflow/gsm8k"
"""GSM8K rows written by ``python -m extensions.data.gsm8k``: tool-using, multi-turn prompts."""
LONGFLOW_LEDGER = "longflow/ledger"
"""The paged-ledger task (``python -m extensions.data.ledger``): its answer is a ``#### <number>`` too."""

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
# A line that starts with ``####`` (optionally after ``**``); group 1 is the rest of the line.
_STRICT_LINE = re.compile(r"^[ \t]*(?:\*\*)?[ \t]*####[ \t]*(.*?)[ \t]*$", re.MULTILINE)
# Number-like tokens: sign, optional $, thousands-grouped or plain integer part, optional fraction.
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)")


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks, text before a stray ``</think>``, and an unclosed ``<think>`` tail."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text


def extract_strict(text: str) -> str | None:
    """Canonical number on the last ``#### N`` line of ``text``, or None."""
    lines = _STRICT_LINE.findall(text)
    if not lines:
        return None
    return normalize_number(lines[-1])


def extract_flexible(text: str) -> str | None:
    """Canonical form of the last number in ``text``, or None if there is none."""
    for token in reversed(_NUMBER.findall(text)):
        number = normalize_number(token)
        if number is not None:
            return number
    return None


def extract_answer(text: str, mode: Mode) -> str | None:
    """Strip thinking from ``text``, then extract the answer in ``mode``."""
    visible = strip_thinking(text)
    return extract_strict(visible) if mode == "strict" else extract_flexible(visible)


def is_correct(answer: str | None, ground_truth: str) -> bool:
    """True when an extracted canonical ``answer`` equals the canonical ``ground_truth``."""
    return answer is not None and numbers_equal(answer, ground_truth)
