"""``react``: ReAct-style calls, one ``Action`` line plus a JSON ``Action Input`` each.

    Thought: I need the weather first.
    Action: get_weather
    Action Input: {"city": "Paris"}

Several Action blocks are several calls. A ``Final Answer:`` line anywhere means the model
is done: no calls and no errors, whatever else it wrote. The tool name may be wrapped in
backticks or quotes; the input must be a JSON object (it may span lines). The Thought stays
in the content; each executed block goes from its ``Action:`` to the end of its JSON.
"""

from __future__ import annotations

import json
import re

from verl.experimental.agent_loop.tool_parser import ToolParser

from extensions.parsers.base import Attempt, DetailedToolParser
from extensions.parsers.calls import DECODER, json_kind, json_problem

ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*)$", re.MULTILINE)
ACTION_INPUT = re.compile(r"^[ \t]*Action[ \t]*Input[ \t]*:[ \t]*", re.MULTILINE)
FINAL_ANSWER = re.compile(r"^[ \t]*Final[ \t]*Answer[ \t]*:", re.MULTILINE)
REACT_EXAMPLE = "Action: <tool> on one line, then Action Input: {...} (a JSON object) on the next"


def scan_react(visible: str) -> list[Attempt]:
    """One attempt per ``Action:`` line, its input searched for up to the next ``Action:``."""
    if FINAL_ANSWER.search(visible):
        return []
    actions = list(ACTION.finditer(visible))
    ends = [action.start() for action in actions[1:]] + [len(visible)]
    return [_check_action(visible, action, ends[index]) for index, action in enumerate(actions)]


def _check_action(visible: str, action: re.Match[str], region_end: int) -> Attempt:
    start = action.start()
    name = action.group(1).strip().strip("`\"'").strip()
    if not name:
        return Attempt(start, action.end(), REACT_EXAMPLE, problem=' has no tool name after "Action:"')
    action_input = ACTION_INPUT.search(visible, action.end(), region_end)
    if action_input is None:
        return Attempt(start, action.end(), REACT_EXAMPLE, problem=' has no "Action Input:" line')
    rest = visible[action_input.end() : region_end]
    json_start = action_input.end() + len(rest) - len(rest.lstrip())
    try:
        value, end = DECODER.raw_decode(visible[:region_end], json_start)
    except (json.JSONDecodeError, RecursionError) as error:
        return Attempt(start, region_end, REACT_EXAMPLE, problem=json_problem(error, json_start))
    if not isinstance(value, dict):
        problem = f': "Action Input" must be a JSON object, got {json_kind(value)}'
        return Attempt(start, end, REACT_EXAMPLE, problem=problem)
    return Attempt(start, end, REACT_EXAMPLE, name=name, arguments=value)


@ToolParser.register("react")
class ReactToolParser(DetailedToolParser):
    """Thought / Action / Action Input blocks; ``Final Answer:`` ends the episode."""

    def scan(self, visible: str) -> list[Attempt]:
        """See ``scan_react``."""
        return scan_react(visible)
