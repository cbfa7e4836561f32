"""The calculator: exact values, refusals with reasons, and the tool around it."""

from __future__ import annotations

import pytest

from extensions.tools.calculator import CalculatorTool, calculator


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("(12 + 30) * 3 / 4", "31.5"),
        ("1/3*3", "1"),
        ("0.1 + 0.2", "0.3"),
        ("2**10", "1024"),
        ("2**-2", "0.25"),
        ("-3 // 2", "-2"),
        ("7 % 3", "1"),
        ("-(-3)", "3"),
        ("1/3", "0.3333333333333333 (exactly 1/3)"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623730951"),
        ("2**0.5", "1.4142135623730951"),
        ("round(2.675, 2)", "2.68"),  # exact: the literal 2.675 is not the float 2.67499...
        ("round(7/2)", "4"),
        ("abs(-2.5) + max(3, 7, 5) - min(1, 2)", "8.5"),
        ("floor(-2.5) + ceil(2.1)", "0"),
        ("1_000 * 2.5e-3", "2.5"),
        ("12345678901234567890 * 98765432109876543210", "1219326311370217952237463801111263526900"),
    ],
)
def test_exact_values(expression: str, value: str) -> None:
    assert calculator(expression) == value


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("2**100000", "result too large (more than 4000 bits)"),
        ("9**9**9", "result too large (more than 4000 bits)"),
        ("e**1000", "result too large"),
        ("2^3", "operator '^' is not supported; use ** for powers"),
        ("1,000 + 1", "commas are not allowed: write 1000, not 1,000"),
        ("", "empty expression"),
        ("1 +", "not a valid expression (invalid syntax): 1 +"),
        ("1" * 501, "expression is 501 characters long; the limit is 500"),
        (
            "__import__('os').system('ls')",
            "unsupported function __import__('os').system; available: abs, ceil, floor, max, min, round, sqrt",
        ),
        ("open('x')", "unsupported function open; available: abs, ceil, floor, max, min, round, sqrt"),
        ("x + 1", "unknown name 'x'; known: abs, ceil, e, floor, max, min, pi, round, sqrt"),
        ("3 < 4", "unsupported syntax: 3 < 4"),
        ("'a' * 3", "not a number: 'a'"),
        ("sqrt(-1)", "sqrt of a negative number"),
        ("(-8) ** (1/3)", "a negative number to a fractional power is not a real number"),
        ("min()", "min() needs at least one number"),
        ("sqrt(1, 2)", "sqrt() got 2 argument(s)"),
        ("round(1.5, 0.5)", "round()'s second argument must be a whole number of places, at most 100"),
    ],
)
def test_errors_explain_themselves(expression: str, error: str) -> None:
    assert calculator(expression) == f"error: {error}"


async def test_tool_schema_and_calls() -> None:
    tool = CalculatorTool({"type": "native"})
    function = tool.tool_schema.function
    assert (function.name, list(function.parameters.properties), function.parameters.required) == (
        "calculator",
        ["expression"],
        ["expression"],
    )
    assert await tool.execute("t", {"expression": "6*7"}) == (tool_response("42"), 0.0, {"ok": True})
    assert await tool.execute("t", {"expression": "1/0"}) == (
        tool_response("error: division by zero"),
        0.0,
        {"ok": False},
    )
    assert await tool.execute("t", {"expr": "1"}) == (
        tool_response(
            "error: missing required argument 'expression'; unexpected argument 'expr'. "
            "calculator takes expression (string, required)."
        ),
        0.0,
        {"ok": False},
    )


def tool_response(text: str) -> object:
    from verl.tools.schemas import ToolResponse

    return ToolResponse(text=text)
