"""The ``calculator`` tool: exact arithmetic by walking the expression's ``ast``; nothing is ever eval'd.

Numbers are exact fractions (``0.1 + 0.2`` is ``0.3``, ``1/3*3`` is ``1``) until a function or a
fractional power makes them floats. Operators: ``+ - * / // % **``, unary ``-``/``+``, parentheses.
Functions: ``sqrt abs round min max floor ceil``; constants ``pi e``. Results are capped at
``MAX_BITS`` bits and checked before every power, so ``9**9**9`` is refused, not computed.
Tool YAML: ``tool_configs/calculator.yaml`` (no config keys).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.errors import ToolError
from extensions.tools.schema import argument_error, parse_tool_config, schema_from_function

Number = Fraction | float
MAX_LENGTH = 500
MAX_BITS = 4000  # about 1200 decimal digits
BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
SYMBOLS = {ast.BitXor: "^", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}
CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e}


class CalculatorError(ToolError):
    """The expression cannot be evaluated; the message is shown to the model."""


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the result.

    Supports numbers, + - * / // % ** and parentheses, and the functions sqrt, abs, round, min, max,
    floor and ceil. Division is exact: 1/3*3 gives 1.

    Args:
        expression: The expression to evaluate, for example "(12 + 30) * 3 / 4".
    """
    try:
        return format_number(evaluate(expression))
    except CalculatorError as exc:
        return f"error: {exc}"


def evaluate(expression: str) -> Number:
    """The value of ``expression``; raises CalculatorError saying what is wrong."""
    text = expression.strip()
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_LENGTH:
        raise CalculatorError(f"expression is {len(text)} characters long; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else "too deeply nested"
        raise CalculatorError(f"not a valid expression ({detail}): {text}") from None
    return _Evaluator(text).visit(tree.body)


def format_number(value: Number) -> str:
    """``7/2`` -> ``3.5``; ``1/3`` -> ``0.3333333333333333 (exactly 1/3)``; floats as Python prints them."""
    if isinstance(value, float):
        return repr(value)
    if value.denominator == 1:
        return str(value.numerator)
    twos, fives, rest = _factor_out(value.denominator)
    if rest == 1:  # a terminating decimal: print all of it
        places = max(twos, fives)
        digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
        return f"{'-' if value < 0 else ''}{digits[:-places]}.{digits[-places:]}"
    try:
        return f"{float(value)!r} (exactly {value.numerator}/{value.denominator})"
    except OverflowError:
        return f"{value.numerator}/{value.denominator}"


class _Evaluator:
    def __init__(self, text: str) -> None:
        self.text = text

    def visit(self, node: ast.expr) -> Number:
        if isinstance(node, ast.Constant):
            return self._literal(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self.visit(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise CalculatorError(f"unknown name {node.id!r}; known: {', '.join(sorted({*CONSTANTS, *FUNCTIONS}))}")
        if isinstance(node, ast.Tuple):
            raise CalculatorError("commas are not allowed: write 1000, not 1,000")
        raise CalculatorError(f"unsupported syntax: {ast.get_source_segment(self.text, node) or type(node).__name__}")

    def _literal(self, node: ast.Constant) -> Number:
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"not a number: {node.value!r}")
        if isinstance(node.value, int):
            return _checked(Fraction(node.value))
        source = (ast.get_source_segment(self.text, node) or "").replace("_", "")
        try:
            return _checked(Fraction(source))  # the literal as written: 0.1 is exactly 1/10
        except ValueError:
            return _checked(Fraction(repr(node.value)))

    def _binary(self, node: ast.BinOp) -> Number:
        if type(node.op) in SYMBOLS:
            hint = "; use ** for powers" if isinstance(node.op, ast.BitXor) else ""
            raise CalculatorError(f"operator {SYMBOLS[type(node.op)]!r} is not supported{hint}")
        left, right = self.visit(node.left), self.visit(node.right)
        try:
            if isinstance(node.op, ast.Pow):
                return _power(left, right)
            return _checked(BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result too large") from None

    def _call(self, node: ast.Call) -> Number:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in FUNCTIONS or node.keywords:
            shown = ast.get_source_segment(self.text, node.func) or "?"
            raise CalculatorError(f"unsupported function {shown}; available: {', '.join(sorted(FUNCTIONS))}")
        args = [self.visit(arg) for arg in node.args]
        try:
            return _checked(FUNCTIONS[name](*args))
        except TypeError:
            raise CalculatorError(f"{name}() got {len(args)} argument(s)") from None
        except OverflowError:
            raise CalculatorError("result too large") from None


def _power(base: Number, exponent: Number) -> Number:
    if isinstance(base, Fraction) and isinstance(exponent, Fraction) and exponent.denominator == 1:
        size = max(base.numerator.bit_length(), base.denominator.bit_length())
        if size * abs(exponent.numerator) > MAX_BITS and abs(base) != 1 and base != 0:
            raise CalculatorError(f"result too large (more than {MAX_BITS} bits)")
        return _checked(base ** int(exponent.numerator))
    result = float(base) ** float(exponent)
    if isinstance(result, complex):
        raise CalculatorError("a negative number to a fractional power is not a real number")
    return _checked(result)


def _sqrt(value: Number) -> Number:
    if value < 0:
        raise CalculatorError("sqrt of a negative number")
    if isinstance(value, Fraction):
        top, bottom = math.isqrt(value.numerator), math.isqrt(value.denominator)
        if top * top == value.numerator and bottom * bottom == value.denominator:
            return Fraction(top, bottom)
    return math.sqrt(value)


def _round(value: Number, places: Number = Fraction(0)) -> Number:
    if not (isinstance(places, Fraction) and places.denominator == 1 and abs(places) <= 100):
        raise CalculatorError("round()'s second argument must be a whole number of places, at most 100")
    return round(value, int(places))


def _min_max(pick: Callable[..., Number]) -> Callable[..., Number]:
    def apply(*values: Number) -> Number:
        if not values:
            raise CalculatorError(f"{pick.__name__}() needs at least one number")
        return pick(values)

    return apply


FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": _sqrt,
    "abs": abs,
    "round": _round,
    "min": _min_max(min),
    "max": _min_max(max),
    "floor": lambda x: Fraction(math.floor(x)),
    "ceil": lambda x: Fraction(math.ceil(x)),
}


def _checked(value: Number) -> Number:
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            raise CalculatorError("result too large")
        return value
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise CalculatorError(f"result too large (more than {MAX_BITS} bits)")
    return value


def _factor_out(number: int) -> tuple[int, int, int]:
    twos = fives = 0
    while number % 2 == 0:
        number, twos = number // 2, twos + 1
    while number % 5 == 0:
        number, fives = number // 5, fives + 1
    return twos, fives, number


class CalculatorConfig(BaseModel):
    """The calculator takes no config keys beyond verl's ``type``."""

    model_config = ConfigDict(extra="forbid")


class CalculatorTool(BaseTool):
    """verl tool around ``calculator``; stateless."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        self.settings = parse_tool_config(CalculatorConfig, config, tool="calculator")
        super().__init__(config, tool_schema or schema_from_function(calculator))

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Evaluate ``parameters["expression"]``; every problem comes back as text starting with ``error:``."""
        text = argument_error(self.tool_schema, parameters) or calculator(parameters["expression"])
        return ToolResponse(text=text), 0.0, {"ok": not text.startswith("error:")}
