"""The record every trajectory carries: termination reasons, the ``extras`` payload and turn records.

One small module with no verl imports, read by the loop (``episode.py`` writes the records), the
reward (``rewards/trajectory.py`` reads them), the metrics (``metrics.py``) and the estimators.
``extras`` travels as the batch column ``extra_fields["extras"]``; its keys and the counts in it
are the same for every trajectory, so verl can concatenate batches of different loops.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, TypedDict


class Reason(str, Enum):
    """Why a trajectory ended."""

    FINAL_ANSWER = "final_answer"
    INTERACTION_DONE = "interaction_done"
    MAX_ASSISTANT_TURNS = "max_assistant_turns"
    MAX_TOOL_ROUNDS = "max_tool_rounds"
    MAX_USER_TURNS = "max_user_turns"
    RESPONSE_BUDGET = "response_budget"
    PROMPT_TOO_LONG = "prompt_too_long"
    TIME_BUDGET = "time_budget"
    """``max_trajectory_s`` reached (``time_budget.py``)."""
    REPEAT_LOOP = "repeat_loop"
    """``code_fence.end_after_repeats`` blocks were refused for repeating code that already ran."""
    MAX_SEGMENTS = "max_segments"
    """Context folding: the context filled in the last segment allowed."""
    FOLDED = "folded"
    """Context folding: not an end, the reason of every segment but a trajectory's last."""
    ERROR = "error"


TERMINATION_REASONS: tuple[str, ...] = tuple(reason.value for reason in Reason)
"""Every valid ``extras["termination_reason"]``, in declaration order."""

COUNTS: tuple[str, ...] = (
    "num_assistant_turns",
    "num_tool_rounds",
    "num_user_turns",
    "num_tool_calls",
    "num_tool_errors",
    "num_malformed_tool_calls",
    "num_executed_calls",
    "num_successful_calls",
    "num_invented_outputs",
    "num_repeated_blocks",
)
"""The whole-number counts in every ``extras``: assistant turns (generations), rounds of tool results,
user messages appended, tool calls run (inline code blocks included), calls that failed before or while
running (unknown tool, bad arguments, timeout, exception), calls the parser could not read, calls the tool
ran, calls that ran without error, ```` ```output ```` blocks the model wrote itself, code blocks not run because the same
code already ran (code-fence format)."""


class CallRecord(TypedDict):
    """One tool call and what it returned (``ToolOutcome.record``)."""

    name: str
    arguments: str
    latency_s: float
    reward: float | None
    error: str | None
    executed: bool
    succeeded: bool
    result: str


class CodeCallRecord(CallRecord):
    """A code block run inside an assistant turn; ``span`` locates its inserted output (mask 0),
    ``anchor`` fingerprints the context after it (where the turn's next step starts)."""

    span: list[int]
    anchor: str


class TurnRecord(TypedDict, total=False):
    """One turn, located in the response tokens: ``response[span[0]:span[1]]``.

    Every record has ``index``, ``role`` and ``span``; the rest depends on the role:
    assistant: ``latency_s``, ``tool_calls`` (names), ``malformed_tool_calls``, ``anchor`` (context
    hash), ``code_calls`` (code-fence format), ``reward`` (its process reward, when the run's reward
    is the pack's) and ``step_rewards`` (that reward split over the steps the code calls divide the
    turn into, when there are calls); tool: ``tool_calls`` (``CallRecord`` s), ``malformed_tool_calls``, ``latency_s``;
    user: ``latency_s``, ``score``, ``text``, ``appended``. Context folding adds ``fold`` (the user
    message asking for a summary) and ``summary``/``summary_tagged`` (the assistant turn writing it), and
    ``carried`` (a user message without room in its segment, given to the next one after the summary).
    An assistant turn also has ``policy_versions`` when the server reports weight versions (verl's v1 trainer):
    [first, last] ``global_steps`` of the weights that generated it; they differ when a weight update came during
    the turn: a reply aborted and resumed (partial rollouts), or an update between a code-fence turn's replies.
    """

    index: int
    role: Literal["assistant", "tool", "user"]
    span: list[int]
    latency_s: float
    tool_calls: list[Any]
    malformed_tool_calls: list[str]
    anchor: str
    code_calls: list[CodeCallRecord]
    reward: float
    step_rewards: list[float]
    score: float
    text: str
    appended: bool
    fold: bool
    summary: bool
    summary_tagged: bool
    carried: bool
    policy_versions: list[int]


class Extras(TypedDict):
    """``extra_fields["extras"]`` of one trajectory (plus the ``COUNTS``, each an int).

    A folded trajectory's segments (``folding_loop.py``) each carry their own ``Extras`` plus
    ``SegmentExtras``; the counts are the trajectory's so far.
    """

    agent_name: str
    termination_reason: str
    error: str | None
    turns: list[TurnRecord]
    final_answer_text: str
    interaction: str | None
    opening_message: str | None
    started_at: float
    """Wall clock (``time.time()``, seconds) when the loop took the sample."""
    finished_at: float
    """Wall clock when this output (a folded trajectory's segment: that segment) was built."""


class SegmentExtras(TypedDict, total=False):
    """What a folding loop adds to each segment's ``extras``."""

    segment: int
    num_segments: int
    fold_trigger: Literal["context", "budget", "tool"]
    """Why the segment was folded (every segment but the last): the context reached the trigger
    fraction of the window, the response budget had no room left, or the model called ``fold``."""
    summary_tokens: int
