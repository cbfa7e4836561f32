"""Code-fence tool calls: a fenced ```` ```python ```` block is a call to ``python_exec``.

Small models trained on code (and tool-integrated RL work: ToRL, SimpleTIR, VerlTool) write a
program in a fenced block, stop, and read the interpreter's output in an ```` ```output ````
block before going on. ``LongWorkflowAgent`` with ``tool_parser: code_fence`` does exactly that,
inside one assistant turn:

1. generation stops at a closing fence (the stop string ``"\\n```\\n"``);
2. if the text since the last real output ends with a closed block in a configured language
   (outside ``<think>``), the block's code goes to the configured tool;
3. the tool's real output is appended as ```` ```output\\n...\\n``` ```` tokens with mask 0 (never
   trained on), and generation continues in the same turn.

A block the model closes and then ends its turn on (``<|im_end|>`` right after the fence) is
run as an ordinary tool round (``extensions/parsers/code_fence.py``): its output comes back as a tool
message. An ```` ```output ```` block the model writes itself is never taken for a result: it is
counted (``invented_outputs``) and stays trained text like any other. Errors (a syntax error, a
traceback's last line, a timeout) are the output; nothing is a penalty. Per-turn and
per-trajectory caps (``CodeFenceSettings``) bound the executions: past a cap, or when its code
already ran, a block's output says it was not run (``extensions/code_fence_loop.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from extensions.thinking import visible_text

STOP_STRINGS = ("\n```\n",)
"""Where generation pauses: a closing fence (or a bare opening one, which is simply resumed)."""

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[ \t]*$", re.MULTILINE)


class CodeFenceSettings(BaseModel):
    """``code_fence:`` of a ``long_workflow`` entry with ``tool_parser: code_fence``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    languages: list[str] = Field(default_factory=lambda: ["python", "py", "python3"], min_length=1)
    """Fence languages that are calls (the word after the opening fence, e.g. ``python``), compared case-insensitively."""
    tool: str = "python_exec"
    """The tool a block calls (a name from the tool YAML)."""
    argument: str = "code"
    """The tool argument that receives the block's code."""
    max_calls_per_turn: int = Field(4, ge=1)
    """Most executions in one assistant turn; later blocks of the turn are not run (and say so)."""
    max_calls_per_trajectory: int = Field(8, ge=1)
    """Most executions in one trajectory."""
    max_output_tokens: int = Field(256, ge=8)
    """An output longer than this is cut (by tokens) before it is inserted."""
    end_after_repeats: int | None = Field(None, ge=1)
    """The trajectory ends (reason ``repeat_loop``, no answer read) once this many of its blocks were refused for
    repeating code that already ran; None: never. A model that rewrites the same block after "Not run" is looping."""


@dataclass(frozen=True)
class Block:
    """One fenced block of the text: its language, code and character span (fences included)."""

    language: str
    code: str
    start: int
    end: int
    closed: bool


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` in order; an unclosed last block runs to the end."""
    blocks, opened = [], None
    for match in _FENCE.finditer(text):
        if opened is None:
            opened = match
            continue
        if match.group(1):  # ```lang inside an open block: not a closing fence
            continue
        code = text[opened.end() + 1 : match.start()].rstrip("\n")
        blocks.append(Block(opened.group(1).lower(), code, opened.start(), match.end(), True))
        opened = None
    if opened is not None:
        blocks.append(Block(opened.group(1).lower(), text[opened.end() + 1 :], opened.start(), len(text), False))
    return blocks


def trailing_call(text: str, languages: list[str]) -> Block | None:
    """The closed block in one of ``languages`` that ``text`` ends with (whitespace after it allowed).

    Blocks written inside ``<think>`` are never calls: thinking is blanked out first.
    """
    visible = visible_text(text)
    blocks = fenced_blocks(visible)
    if not blocks:
        return None
    last = blocks[-1]
    wanted = {lang.lower() for lang in languages}
    if not last.closed or last.language not in wanted or visible[last.end :].strip():
        return None
    return last


def invented_outputs(text: str) -> int:
    """How many ```` ```output ```` blocks the model wrote itself (outside thinking)."""
    visible = visible_text(text)
    return sum(block.language == "output" for block in fenced_blocks(visible))


def output_block(result: str, *, after: str) -> str:
    """The text inserted after a block: ```` ```output\\n<result>\\n```\\n````, on a line of its own."""
    lead = "" if after.endswith("\n") else "\n"
    body = result.rstrip("\n") or "(no output)"
    return f"{lead}```output\n{body}\n```\n"


def call_arguments(settings: CodeFenceSettings, code: str) -> str:
    """The JSON arguments string of a block's call."""
    return json.dumps({settings.argument: code}, ensure_ascii=False)
