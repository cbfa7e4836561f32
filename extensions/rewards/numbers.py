"""Normalise numeric answers so ``$1,000.00``, ``**1000**`` and ``\\boxed{1000}`` compare equal.

Comparison is exact (``Decimal``), never a float tolerance: GSM8K answers are integers or
short decimals, and ``72.0`` vs ``72`` is a formatting difference, not a rounding one.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

# A plain decimal after clean-up: optional minus, digits, optional fraction.
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_BOXED = re.compile(r"^\\boxed\{(.*)\}$", re.DOTALL)
_SPACE_AFTER_SIGN = re.compile(r"(?<=[-+$])\s+")  # "$ 5", "- 5"; never between digits ("7 2" is no number)
_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2013": "-"})


def _unwrap(text: str) -> str:
    """Peel surrounding whitespace, ``**``/``*`` emphasis and ``\\boxed{...}`` until none is left."""
    previous = None
    while text != previous:
        previous = text
        text = text.strip().strip("*").strip()
        boxed = _BOXED.match(text)
        if boxed:
            text = boxed.group(1)
    return text


def normalize_number(text: str) -> str | None:
    """Return the canonical form of a number written as ``text``, or None if it is not one number.

    Accepted decorations: surrounding ``**``/``\\boxed{}``, ``$`` (before or after the sign),
    thousands commas, a leading ``+``, a trailing sentence period and trailing fractional zeros.
    ``"$1,000.00"`` -> ``"1000"``, ``"+3.50"`` -> ``"3.5"``, ``"-0"`` -> ``"0"``.
    """
    cleaned = _unwrap(str(text).translate(_MINUS_SIGNS))
    cleaned = _SPACE_AFTER_SIGN.sub("", cleaned).replace("$", "").replace(",", "")
    if cleaned.endswith("."):
        cleaned = cleaned[:-1]
    if cleaned.startswith("+"):
        cleaned = cleaned[1:]
    if not _PLAIN_NUMBER.fullmatch(cleaned):
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        return None
    canonical = format(value.normalize(), "f")
    return "0" if canonical in {"-0", "0"} else canonical


def numbers_equal(left: str, right: str) -> bool:
    """True when two canonical numbers (``normalize_number``'s, or ``p/q`` from a boxed fraction) are equal."""
    return Fraction(left) == Fraction(right)
