"""GSM8K (and ledger) answer extraction: what counts as the final answer, and what never does.

1. A trajectory that ended on ``response_budget`` (its last reply was cut off; a folding loop's last segment
   too), ``time_budget`` (stopped by ``max_trajectory_s``, possibly mid-reply), ``repeat_loop`` (stopped mid-reply by
   ``code_fence.end_after_repeats``) or ``error`` has no answer (``NO_ANSWER_REASONS``; ``compute_score`` applies
   it): a reward that pays for a cut-off reply can be learned. ``max_segments`` (a fold was wanted, none was left)
   keeps its answer and pays ``budget_penalty``, as ``response_budget`` and ``repeat_loop`` do.
2. Only prose counts. Thinking (``<think>...</think>``), fenced blocks (```` ```python ````, the code-fence
   format's ```` ```output ````, any other), an unclosed fence and everything after it, and inline code
   (`` `...` ``, so the prompt's own `` `#### 72` `` copied mid-reply) are removed first (``prose``).
3. An answer form: a ``#### N`` line or ``\\boxed{...}`` (also ``\\fbox``); the last one in the prose wins.
   The box's content is read by ``math-verify`` (Hugging Face's parser for LaTeX answers: ``\\frac{1}{2}``,
   ``\\$1,080``, ``72 \\text{ apples}``); a ``####`` line or box whose content is not one number is no answer.
4. Modes (``reward_kwargs.mode``): ``strict`` reads the answer forms only; ``flexible`` (the default of the
   experiments' configs) reads them and, when there is none, the last number of the prose that is no part of
   an identifier (``..._after_20_hours``, ``x2``, ``v1.5b`` never count).
"""

from __future__ import annotations

import re
from fractions import Fraction
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

NO_ANSWER_REASONS = frozenset({"response_budget", "time_budget", "repeat_loop", "error"})
"""Termination reasons whose trajectory has no answer: its last reply was cut off or stopped, or the loop failed."""

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCED = re.compile(r"```.*?```", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# A line that starts with ``####`` (optionally after ``**``); group 1 is the rest of the line.
_STRICT_LINE = re.compile(r"^[ \t]*(?:\*\*)?[ \t]*####[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# Number-like tokens no part of an identifier: sign, optional $, grouped or plain integer part, fraction.
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_MAX_BOX_CHARS = 200  # longer box contents are not a number; math-verify is not asked (parsing has no timeout here)


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks, text before a stray ``</think>``, and an unclosed ``<think>`` tail."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text


def prose(text: str) -> str:
    """``text`` without thinking, fenced blocks (an unclosed fence: everything after it) and inline code."""
    text = _FENCED.sub("\n", strip_thinking(text))
    if "```" in text:
        text = text.split("```", 1)[0]
    return _INLINE_CODE.sub(" ", text)


def _box_contents(text: str) -> list[tuple[int, str | None]]:
    """(position, content) of each ``\\boxed{...}``; None for an unclosed box."""
    boxes = []
    for match in _BOX.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        boxes.append((match.start(), text[match.end() : i - 1] if depth == 0 else None))
    return boxes


def read_boxed(content: str | None) -> str | None:
    """The canonical number in a box's content (``normalize_number``'s form, or ``p/q``), or None."""
    if content is None or len(content) > _MAX_BOX_CHARS:
        return None
    plain = normalize_number(content)
    if plain is not None:
        return plain
    from math_verify import LatexExtractionConfig, parse  # imports sympy: only when a box needs it

    parsed = parse(
        "\\boxed{" + content + "}",
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0)],
        parsing_timeout=None,
    )
    return _number_of(parsed[0]) if parsed else None


def _number_of(value: object) -> str | None:
    import sympy

    if not isinstance(value, sympy.Number) or not value.is_finite:
        return None
    if isinstance(value, sympy.Integer):
        return str(int(value))
    if isinstance(value, sympy.Rational):
        fraction = Fraction(int(value.p), int(value.q))
        return normalize_number(str(value.p / value.q)) if _terminates(fraction) else f"{value.p}/{value.q}"
    return normalize_number(str(value))


def _terminates(fraction: Fraction) -> bool:
    q = fraction.denominator
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


def answer_forms(text: str) -> list[tuple[int, str | None]]:
    """(position, canonical number or None) of each ``#### N`` line and ``\\boxed{}`` in already-cleaned prose."""
    forms = [(m.start(), normalize_number(m.group(1))) for m in _STRICT_LINE.finditer(text)]
    forms += [(position, read_boxed(content)) for position, content in _box_contents(text)]
    return sorted(forms, key=lambda form: form[0])


def extract_strict(text: str) -> str | None:
    """The last answer form (``#### N`` line or ``\\boxed{N}``) of the prose of ``text``, or None."""
    forms = answer_forms(prose(text))
    return forms[-1][1] if forms else None


def extract_flexible(text: str) -> str | None:
    """The last answer form of the prose, else its last number that is no part of an identifier, else None."""
    visible = prose(text)
    forms = answer_forms(visible)
    if forms:
        return forms[-1][1]
    for token in reversed(_NUMBER.findall(visible)):
        number = normalize_number(token)
        if number is not None:
            return number
    return None


def extract_answer(text: str, mode: Mode, termination_reason: str = "") -> str | None:
    """The answer of a final reply in ``mode`` (module docstring); None when it ended for a ``NO_ANSWER_REASONS``."""
    if termination_reason in NO_ANSWER_REASONS:
        return None
    return extract_strict(text) if mode == "strict" else extract_flexible(text)


def is_correct(answer: str | None, ground_truth: str) -> bool:
    """True when an extracted canonical ``answer`` equals the canonical ``ground_truth``."""
    return answer is not None and numbers_equal(answer, ground_truth)
