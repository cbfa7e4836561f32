"""Remove one given quantity from a GSM8K problem, checked so the problem cannot be solved without it.

    masked = mask_quantity(question, answer)   # Masked | None
    masked.question    "Janet's ducks lay some eggs per day. She eats three ..."
    masked.fact        "Janet's ducks lay 16 eggs per day."
    masked.value       "16"

The rule: take the numbers written with digits in the question, in order, and remove the first
one that passes every check:

1. its value appears exactly once in the question (no other mention gives it away);
2. the reference solution uses it: GSM8K answers carry their arithmetic as ``<<expr=result>>``,
   and re-running that arithmetic with the value changed (v -> v + 1, changes carried through
   later steps) changes the final answer. So the answer depends on the removed quantity, and
   with it gone (every other number kept) the problem has no unique answer.

``$N`` becomes "a certain amount", ``N%`` "a certain percentage", other numbers "some" ("certain"
after "a"/"an"). The
user is told the sentence of the original question that held the number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from extensions.errors import ToolError
from extensions.tools.calculator import evaluate

# A quantity in the question: optional $, integer (maybe 1,000-grouped), optional decimals, optional %.
_QUANTITY = re.compile(r"(?<![\w.,/:$])(\$?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)(?![\w/:]|[.,]\d)")
_CALC = re.compile(r"<<([^<>=]+)=([^<>]+)>>")
_EXPR_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"[^.!?]*(?:[.!?](?!\d)|$)")


@dataclass(frozen=True)
class Masked:
    """A problem with one quantity removed."""

    question: str
    """The question with the quantity replaced by words ("some", "a certain amount", ...)."""
    fact: str
    """The sentence of the original question that held the quantity: the user's private fact."""
    value: str
    """The removed number as written, without $, % or thousands commas (e.g. "80000")."""
    text: str
    """The removed text as it was written in the question (e.g. "$80,000")."""
    replacement: str
    """What replaced it."""


def _value(text: str) -> Fraction:
    return Fraction(text.replace(",", ""))


def _canon(value: Fraction | float) -> str:
    value = Fraction(value).limit_denominator(10**6) if isinstance(value, float) else value
    return str(value)


def depends_on(answer: str, value: Fraction, final: Fraction) -> bool:
    """Does the answer's ``<<expr=result>>`` arithmetic give a different final answer when ``value`` changes?"""
    changed = {_canon(value): value + 1}
    steps = _CALC.findall(answer)
    if not steps:
        return False
    for expr, result in steps:

        def swap(match: re.Match[str]) -> str:
            new = changed.get(_canon(Fraction(match.group(0))))
            return f"({new.numerator}/{new.denominator})" if new is not None else match.group(0)

        new_expr = _EXPR_NUMBER.sub(swap, expr)
        if new_expr == expr:
            continue
        try:
            old_value, new_value = evaluate(expr), evaluate(new_expr)
            written = Fraction(result.replace(",", "").strip())
        except (ToolError, ValueError, ZeroDivisionError):
            return False
        if new_value != old_value:
            changed[_canon(written)] = Fraction(new_value).limit_denominator(10**6)
    return _canon(final) in changed


def _replacement(dollar: str, percent: str) -> str:
    if dollar:
        return "a certain amount"
    return "a certain percentage" if percent else "some"


def _sentence_at(question: str, position: int) -> str:
    for match in _SENTENCE.finditer(question):
        if match.start() <= position < match.end():
            return match.group(0).strip()
    return question.strip()


def mask_quantity(question: str, answer: str, final: str) -> Masked | None:
    """The first quantity of ``question`` that passes the module's checks, removed; None if none does."""
    matches = list(_QUANTITY.finditer(question))
    values = [_value(m.group(2) + (m.group(3) or "")) for m in matches]
    for match, value in zip(matches, values, strict=True):
        if values.count(value) != 1 or not depends_on(answer, value, Fraction(final)):
            continue
        replacement = _replacement(match.group(1), match.group(4))
        start = match.start()
        if re.search(r"\b(?:a|an)\s+$", question[:start], re.IGNORECASE) and replacement == "some":
            replacement = "certain"  # "a 200 GB file" -> "a certain GB file"
        if start == 0 or question[:start].rstrip().endswith((".", "!", "?")):
            replacement = replacement[0].upper() + replacement[1:]
        masked = question[:start] + replacement + question[match.end() :]
        return Masked(
            question=masked,
            fact=_sentence_at(question, start),
            value=_canon(value) if value.denominator == 1 else str(float(value)),
            text=match.group(0),
            replacement=replacement,
        )
    return None
