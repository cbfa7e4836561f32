"""``auto``: try hermes tags, then JSON, then ReAct; the first format that finds anything wins.

"Anything" counts malformed attempts too: a broken ``<tool_call>`` is reported as such and
the JSON and ReAct readers are not consulted, so one turn is never read in two formats.
Error messages show the example of the format that matched.
"""

from __future__ import annotations

from collections.abc import Callable

from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers.base import Attempt, DetailedToolParser
from extensions.parsers.hermes import scan_hermes
from extensions.parsers.json_blocks import scan_json
from extensions.parsers.react import scan_react

SCANNERS: tuple[Callable[[str], list[Attempt]], ...] = (scan_hermes, scan_json, scan_react)


def scan_auto(visible: str) -> list[Attempt]:
    """The attempts of the first scanner in ``SCANNERS`` that finds any."""
    for scanner in SCANNERS:
        if attempts := scanner(visible):
            return attempts
    return []


@ToolParser.register("auto")
class AutoToolParser(DetailedToolParser):
    """Hermes tags, else bare/fenced JSON, else ReAct."""

    def scan(self, visible: str) -> list[Attempt]:
        """See ``scan_auto``."""
        return scan_auto(visible)
