"""A tool's two inputs, each declared once: the model's arguments and the YAML ``config:``.

- ``schema_from_function(fn, hidden=...)``: the OpenAI tool schema of a typed, docstring'd function
  (via ``transformers.utils.get_json_schema``, as verl's ``function_tool`` does); ``hidden`` parameters
  are supplied by the tool (a sample's ground truth), not by the model, and stay out of the schema.
- ``argument_error(schema, arguments)``: why a call's arguments do not fit the schema, as text for the
  model, or None.
- ``parse_tool_config(model, config, tool=...)``: the YAML ``config:`` validated by a pydantic model,
  every problem reported at once as a ConfigError naming the keys and the valid ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel, ValidationError
from transformers.utils import get_json_schema
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from extensions.errors import ConfigError, choices

ConfigModel = TypeVar("ConfigModel", bound=BaseModel)
VERL_KEYS = frozenset({"type"})
"""Keys verl itself reads from a tool's ``config:`` (``type: native``); passed over here."""
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def schema_from_function(fn: Callable[..., Any], *, hidden: Collection[str] = ()) -> OpenAIFunctionToolSchema:
    """The OpenAI tool schema of ``fn``: its name, docstring and typed, documented parameters, minus ``hidden``.

    Raises transformers' DocstringParsingException / TypeHintParsingException when a visible parameter
    lacks a type hint or an ``Args:`` entry, so a bad signature fails when the tool is built.
    """
    signature = inspect.signature(fn)
    unknown = set(hidden) - set(signature.parameters)
    if unknown:
        raise TypeError(f"{fn.__qualname__} has no parameter(s) {sorted(unknown)} to hide")
    visible = [p for name, p in signature.parameters.items() if name not in hidden]
    hints = get_type_hints(fn)

    def model_view() -> None:
        """Stands in for ``fn`` with only the parameters the model fills in."""

    model_view.__name__ = fn.__name__
    model_view.__doc__ = fn.__doc__
    model_view.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=visible, return_annotation=inspect.Signature.empty
    )
    model_view.__annotations__ = {p.name: hints[p.name] for p in visible if p.name in hints}
    return OpenAIFunctionToolSchema.model_validate(get_json_schema(model_view))


def argument_error(schema: OpenAIFunctionToolSchema, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit ``schema``, as one line for the model; None when they fit."""
    function = schema.function
    params = function.parameters
    usage = f"{function.name} takes " + ", ".join(
        f"{name} ({_type_text(prop.type)}{', required' if name in params.required else ''})"
        for name, prop in params.properties.items()
    )
    if not isinstance(arguments, dict):
        return f"error: arguments must be a JSON object, got {_json_type(arguments)}. {usage}."
    problems = [f"missing required argument '{name}'" for name in params.required if name not in arguments]
    for name, value in arguments.items():
        prop = params.properties.get(name)
        if prop is None:
            problems.append(f"unexpected argument '{name}'")
        elif not _fits(value, prop.type):
            problems.append(f"argument '{name}' must be {_type_text(prop.type)}, got {_json_type(value)}")
    return f"error: {'; '.join(problems)}. {usage}." if problems else None


def bad_arguments(
    schema: OpenAIFunctionToolSchema, arguments: Any
) -> tuple[ToolResponse, float, dict[str, Any]] | None:
    """A tool's ``execute`` result for ``arguments`` that do not fit ``schema`` (what is wrong, no reward, error
    ``bad_arguments``); None when they fit."""
    problem = argument_error(schema, arguments)
    return None if problem is None else (ToolResponse(text=problem), 0.0, {"error": "bad_arguments"})


def parse_tool_config(model: type[ConfigModel], config: Mapping[str, Any] | None, *, tool: str) -> ConfigModel:
    """``config`` (a tool YAML's ``config:``, verl's own keys passed over) validated by ``model``."""
    values = {key: value for key, value in (config or {}).items() if key not in VERL_KEYS}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":
                problems.append(f"{key!r} is not a config key")
            else:
                problems.append(f"{key!r}: {error['msg']} (got {error['input']!r})")
        valid = choices([*model.model_fields, *VERL_KEYS])
        raise ConfigError(
            f"tool {tool!r} config: {'; '.join(problems)}. Valid keys: {valid}. "
            f"Fix the tool's `config:` entry in its tool YAML."
        ) from None


def _fits(value: Any, json_type: str | list[str]) -> bool:
    for name in [json_type] if isinstance(json_type, str) else json_type:
        python_types = _JSON_TYPES.get(name, (object,))
        if isinstance(value, python_types) and not (isinstance(value, bool) and bool not in python_types):
            return True
    return False


def _type_text(json_type: str | list[str]) -> str:
    return json_type if isinstance(json_type, str) else " or ".join(json_type)


def _json_type(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _fits(value, name):
            return name
    return type(value).__name__


def create_kwarg(kwargs: dict[str, Any], key: str) -> Any:
    """A tool instance's creation argument ``key``, given directly or in ``create_kwargs`` (as verl passes it)."""
    return kwargs.get(key, (kwargs.get("create_kwargs") or {}).get(key))


def missing_create_kwarg(tool: str, key: str, what: str) -> str:
    """What a tool says when a sample's dataset row did not give it ``key``."""
    return f"error: {tool} has no {what} for this sample; the dataset must set tools_kwargs.{tool}.create_kwargs.{key}"
