"""Schema derivation, argument checking and config parsing shared by the tools."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field
from transformers.utils.chat_template_utils import DocstringParsingException

from extensions.errors import ConfigError
from extensions.tools.schema import argument_error, parse_tool_config, schema_from_function


class Secret:
    """A type get_json_schema cannot express; fine on a hidden parameter."""


def lookup(city: str, limit: int = 3, *, secret: Secret | None = None) -> Secret:
    """Find places in a city.

    Args:
        city: The city name.
        limit: How many places to return.
        secret: Supplied by the tool.
    """
    return Secret()


def test_schema_comes_from_signature_and_docstring_minus_hidden() -> None:
    schema = schema_from_function(lookup, hidden={"secret"})
    assert schema.model_dump(exclude_none=True) == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find places in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city name."},
                    "limit": {"type": "integer", "description": "How many places to return."},
                },
                "required": ["city"],
            },
            "strict": False,
        },
    }


def test_undocumented_parameters_and_unknown_hidden_names_fail_early() -> None:
    def bare(x: int) -> int:
        """No Args block."""
        return x

    with pytest.raises(DocstringParsingException):
        schema_from_function(bare)
    with pytest.raises(TypeError, match=r"lookup has no parameter\(s\) \['nope'\] to hide"):
        schema_from_function(lookup, hidden={"secret", "nope"})


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"city": "Oslo"}, None),
        ({"city": "Oslo", "limit": 2}, None),
        ({"limit": 2}, "missing required argument 'city'"),
        ({"city": "Oslo", "limit": 2.5}, "argument 'limit' must be integer, got number"),
        ({"city": "Oslo", "limit": True}, "argument 'limit' must be integer, got boolean"),
        ({"city": None}, "argument 'city' must be string, got null"),
        ({"city": "Oslo", "secret": "x"}, "unexpected argument 'secret'"),
    ],
)
def test_argument_error(arguments: dict, problem: str | None) -> None:
    schema = schema_from_function(lookup, hidden={"secret"})
    usage = "lookup takes city (string, required), limit (integer)."
    assert argument_error(schema, arguments) == (None if problem is None else f"error: {problem}. {usage}")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = Field(1, ge=1)
    name: str = "x"


def test_config_passes_verl_type_and_reports_every_problem() -> None:
    assert parse_tool_config(Settings, {"type": "native", "size": 3}, tool="demo") == Settings(size=3)
    assert parse_tool_config(Settings, None, tool="demo") == Settings()
    with pytest.raises(ConfigError) as caught:
        parse_tool_config(Settings, {"type": "native", "size": 0, "colour": "red"}, tool="demo")
    assert str(caught.value) == (
        "tool 'demo' config: 'size': Input should be greater than or equal to 1 (got 0); "
        "'colour' is not a config key. Valid keys: 'name', 'size', 'type'. "
        "Fix the tool's `config:` entry in its tool YAML."
    )
