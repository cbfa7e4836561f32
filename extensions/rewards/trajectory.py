"""Read the agent loop's per-trajectory record out of the ``extra_info`` verl hands the reward.

verl's NaiveRewardManager (``experimental/reward_loop/reward_manager/naive.py``) merges the
agent loop output's ``extra_fields`` into ``extra_info``, so the reward sees top-level keys
``turn_scores``, ``tool_rewards`` and ``extras`` next to the dataset's own ``extra_info``.
Every piece may be missing (single-turn loop, verl's plain ToolAgentLoop, colocated reward
model path): a missing list counts as empty, missing counts as 0, a missing reason as "".

Which text holds the final answer: ``solution_str`` is the decoded WHOLE response, every
assistant turn plus tool results and user turns, so a number in a tool result or an early
turn could be mistaken for the answer. We therefore prefer ``extras.final_answer_text``
(the last assistant message, thinking kept) and otherwise take the last assistant segment of
``solution_str``: verl decodes with ``skip_special_tokens=True``, so Qwen's
``<|im_end|>\\n<|im_start|>user\\n`` turn boundaries arrive as ``\\nuser\\n`` (and
``\\nassistant\\n``); both spellings are recognised. The response starts inside an assistant
turn, so the text before the first marker is assistant text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

from extensions.errors import SampleError, choices
from extensions.records_schema import COUNTS, TERMINATION_REASONS

_ROLE_MARKER = re.compile(r"(?:<\|im_end\|>)?\n(?:<\|im_start\|>)?(user|assistant|tool|system)\n")
_TRAILING_SPECIALS = re.compile(r"(?:\s|<\|im_end\|>|<\|endoftext\|>)+$")


@dataclass(frozen=True)
class TrajectoryPieces:
    """What the reward needs from one trajectory besides its text."""

    turn_scores: list[float]
    """One score per interaction (user) turn, e.g. the code-verify interaction's verdicts."""
    tool_rewards: list[float]
    """One reward per tool call that returned one."""
    termination_reason: str
    """Why the loop stopped (one of ``TERMINATION_REASONS``), or "" when not recorded."""
    num_malformed_tool_calls: int
    """Tool calls the parser could not read (bad JSON, unknown shape)."""
    num_tool_calls: int
    """Tool calls made in the whole trajectory."""
    final_answer_text: str | None
    """The last assistant message with thinking kept, or None when the loop did not record it."""
    num_assistant_turns: int = 0
    """Assistant turns (generations)."""
    num_tool_rounds: int = 0
    """Rounds of tool results appended."""
    num_user_turns: int = 0
    """User (interaction) turns appended."""
    num_tool_errors: int = 0
    """Tool calls that failed (unknown tool, bad arguments, timeout, exception)."""
    num_executed_calls: int = 0
    """Tool calls the tool ran (arguments accepted)."""
    num_successful_calls: int = 0
    """Tool calls that ran without error (``python_exec``: exit status 0, in time)."""
    num_invented_outputs: int = 0
    """```` ```output ```` blocks the model wrote itself (code-fence format)."""
    num_repeated_blocks: int = 0
    """Code blocks not run because the same code already ran (code-fence format)."""


def last_assistant_segment(solution_str: str) -> str:
    """Text of the last assistant turn in a decoded multi-turn response."""
    role, start, segments = "assistant", 0, []
    for marker in _ROLE_MARKER.finditer(solution_str):
        segments.append((role, solution_str[start : marker.start()]))
        role, start = marker.group(1), marker.end()
    segments.append((role, solution_str[start:]))
    assistant_texts = [text for seg_role, text in segments if seg_role == "assistant"]
    return _TRAILING_SPECIALS.sub("", assistant_texts[-1])


def answer_text(solution_str: str, pieces: TrajectoryPieces) -> str:
    """The text to extract the answer from: the recorded final answer, else the last assistant turn."""
    if pieces.final_answer_text is not None:
        return pieces.final_answer_text
    return last_assistant_segment(solution_str)


def read_pieces(extra_info: Mapping[str, Any] | None, *, sample: str) -> TrajectoryPieces:
    """Collect the reward pieces from ``extra_info``; ``sample`` names the sample in error messages."""
    info = extra_info or {}
    extras = info.get("extras") or {}
    if not isinstance(extras, Mapping):
        raise SampleError(f"{sample}: extra_info['extras'] must be a dict, got {type(extras).__name__}")
    reason = extras.get("termination_reason") or ""
    if reason and reason not in TERMINATION_REASONS:
        raise SampleError(
            f"{sample}: unknown extras.termination_reason {reason!r}; expected one of {choices(TERMINATION_REASONS)}"
        )
    final_text = extras.get("final_answer_text")
    if final_text is not None and not isinstance(final_text, str):
        raise SampleError(f"{sample}: extras.final_answer_text must be a string, got {type(final_text).__name__}")
    return TrajectoryPieces(
        turn_scores=_floats(
            info.get("turn_scores"), field="turn_scores", sample=sample, source="the interaction (user)"
        ),
        tool_rewards=_floats(info.get("tool_rewards"), field="tool_rewards", sample=sample, source="a tool call"),
        termination_reason=str(reason),
        final_answer_text=final_text,
        **{key: _count(extras.get(key), key, sample) for key in COUNTS},
    )


def _floats(value: Any, *, field: str, sample: str, source: str) -> list[float]:
    """A list/tuple/array of finite numbers as floats; None is an empty list. A NaN or inf (an HTTP user may
    send ``NaN``, which Python's JSON reads) is a ``SampleError`` naming the sample, the field and its source."""
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise SampleError(f"{sample}: {field} must be a list of numbers, got {type(value).__name__}")
    items = list(value)
    bad = [item for item in items if not isinstance(item, Real)]
    if bad:
        raise SampleError(f"{sample}: {field} must hold numbers only; got {bad[0]!r}")
    floats = [float(item) for item in items]
    bad_at = [i for i, item in enumerate(floats) if not math.isfinite(item)]
    if bad_at:
        i = bad_at[0]
        raise SampleError(
            f"{sample}: {field}[{i}] is {floats[i]!r} (from {source}); scores must be finite numbers, and one NaN "
            "would poison its whole GRPO group"
        )
    return floats


def _count(value: Any, field: str, sample: str) -> int:
    """A non-negative whole count; None is 0."""
    if value is None:
        return 0
    if not isinstance(value, Real) or value < 0 or int(value) != value:
        raise SampleError(f"{sample}: extras.{field} must be a non-negative integer, got {value!r}")
    return int(value)
