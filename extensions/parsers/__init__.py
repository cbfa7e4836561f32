"""Tool-call parsers that say what was malformed, for verl's ``ToolParser`` registry.

    from extensions.parsers import register_parsers
    register_parsers()  # ['json', 'react', 'auto', 'hermes_strict', 'code_fence']
    parser = ToolParser.get_tool_parser("auto", tokenizer)
    result = await parser.extract_tool_calls_detailed(response_ids, tools)  # ParseResult

Importing this package registers the parsers (verl looks them up by name from
``actor_rollout_ref.rollout.multi_turn.format``); ``register_parsers`` does it explicitly.

- ``base.py``: ``ParseResult``, ``DetailedToolParser``, thinking removal, call numbering.
- ``calls.py``: checks and messages shared by the JSON-based formats.
- ``hermes.py`` / ``json_blocks.py`` / ``react.py`` / ``auto.py`` / ``code_fence.py``: one format each.
"""

from __future__ import annotations

from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers.auto import AutoToolParser
from extensions.parsers.base import DetailedToolParser, ParseResult
from extensions.parsers.code_fence import CodeFenceToolParser
from extensions.parsers.hermes import HermesStrictToolParser
from extensions.parsers.json_blocks import JsonToolParser
from extensions.parsers.react import ReactToolParser

PARSERS: dict[str, type[DetailedToolParser]] = {
    "json": JsonToolParser,
    "react": ReactToolParser,
    "auto": AutoToolParser,
    "hermes_strict": HermesStrictToolParser,
    "code_fence": CodeFenceToolParser,
}


def register_parsers() -> list[str]:
    """Put every parser in verl's registry (idempotent) and return their names."""
    for name, parser_class in PARSERS.items():
        ToolParser.register(name)(parser_class)
    return list(PARSERS)


__all__ = [
    "PARSERS",
    "AutoToolParser",
    "CodeFenceToolParser",
    "DetailedToolParser",
    "HermesStrictToolParser",
    "JsonToolParser",
    "ParseResult",
    "ReactToolParser",
    "register_parsers",
]
