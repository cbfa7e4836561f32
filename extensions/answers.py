"""Final-answer extraction and comparison for GSM8K-style numeric answers.

Thinking (``<think>…</think>``, or an unclosed ``<think>`` to the end) is removed first.
``strict`` mode takes the number on the last ``#### N`` line; ``flexible`` takes that if
present, else the last number in the text. Numbers are normalised: commas, ``$``, a
leading ``+``, trailing ``.0``/``.00``, ``**bold**`` and ``\\boxed{}`` wrappers.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
NUMBER = r"[-+]?\$?\s?\d[\d,]*(?:\.\d+)?"
STRICT_RE = re.compile(r"####\s*(" + NUMBER + ")")
ANY_NUMBER_RE = re.compile(NUMBER)


def strip_thinking(text: str) -> str:
    return THINK_RE.sub("", text)


def normalize_number(text: str) -> str | None:
    """'$1,234.50' -> '1234.5'; '+7.00' -> '7'; returns None if not a number."""
    cleaned = re.sub(r"\\boxed\{([^}]*)\}", r"\1", text).replace("*", "")
    cleaned = cleaned.replace(",", "").replace("$", "").replace(" ", "").strip().rstrip(".")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    normalized = format(value.normalize(), "f")
    return "0" if normalized in ("-0", "+0") else normalized


def extract_answer(text: str, mode: str = "flexible") -> str | None:
    """The normalised final answer in ``text``, or None."""
    if mode not in ("strict", "flexible"):
        raise ValueError(f"mode must be 'strict' or 'flexible', got {mode!r}")
    visible = strip_thinking(text)
    strict = STRICT_RE.findall(visible)
    if strict:
        return normalize_number(strict[-1])
    if mode == "strict":
        return None
    numbers = ANY_NUMBER_RE.findall(re.sub(r"\\boxed\{([^}]*)\}", r" \1 ", visible))
    return normalize_number(numbers[-1]) if numbers else None


def answers_match(answer: str, ground_truth: str) -> bool:
    expected = normalize_number(str(ground_truth))
    return expected is not None and normalize_number(str(answer)) == expected
