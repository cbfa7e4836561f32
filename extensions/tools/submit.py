"""The ``submit_answer`` tool: the model answers with a call, as it does everything else, and the call ends the task.

Why: on the lookup ledgers the untrained 0.5B model calls ``read_page`` again even with the asked transaction on
the page in front of it, and never writes a ``#### N`` line (docs/results/ledger-lookup-h200). Offered a tool to
answer with, it does call it (``experiments/ledger_folding/analysis/ledger_needle_probe.py --in-loop --answer-tool``).

The pack's loops (``LongWorkflowAgent`` and its subclasses) never run the call. A valid one ends the trajectory
with ``final_answer`` as soon as the turn is parsed, before any turn, tool-round or budget limit and before a
fold: its answer is recorded as ``#### <answer>`` (``extras.final_answer_text``, what the reward reads), no tool
result follows it, the turn's other calls are not run, and a call past ``max_parallel_calls`` counts. A call whose
arguments do not fit the schema, or whose answer is empty, several lines or not finite, is run like any other and
answered with what is wrong, and the trajectory goes on. Run by a loop that does not know it (verl's stock
``ToolAgentLoop``), it answers ``#### <answer>`` as text. Reward per call: none (the outcome decides). Offered like
any tool: listed in the tool YAML (``tool_configs/ledger.yaml``) and in a sample's ``tool_selection``
(``python -m extensions.data.ledger --answer-tool``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.tools.schema import argument_error, schema_from_function

NAME = "submit_answer"


def submit_answer(answer: float | str) -> str:
    """Submit your final answer. This ends the task: call it once, when you have found the answer.

    Args:
        answer: The final answer, the number only.
    """
    return answer_line(answer)


def answer_line(answer: float | str) -> str:
    """``#### <answer>``: an integral number without a decimal point (``#### 214``, ``#### 2.5``); a string as written,
    trimmed (the 0.5B model often quotes its number: ``"5675"``; the reward parses what follows ``####``)."""
    if isinstance(answer, str):
        return f"#### {answer.strip()}"
    number = int(answer) if float(answer).is_integer() else answer
    return f"#### {number}"


def submitted_answer(schema: OpenAIFunctionToolSchema, calls: list[Any]) -> str | None:
    """The ``#### <answer>`` line of the turn's first valid ``submit_answer`` call (verl ``FunctionCall`` s, their
    ``arguments`` a JSON string), or None when the turn has none."""
    for call in calls:
        if call.name != NAME:
            continue
        try:
            arguments = json.loads(call.arguments)
        except (TypeError, ValueError):
            continue
        if answer_error(schema, arguments) is None:
            return answer_line(arguments["answer"])
    return None


def answer_error(schema: OpenAIFunctionToolSchema, arguments: Any) -> str | None:
    """Why ``arguments`` are no answer: they do not fit the schema, or the answer is empty, several lines or not
    finite; None when they are one. The one check of the loops' ending and of ``execute``."""
    if (problem := argument_error(schema, arguments)) is not None:
        return problem
    answer = arguments["answer"]
    if isinstance(answer, str) and (not answer.strip() or "\n" in answer.strip()):
        return "error: answer must be one line with the number, got an empty or multi-line string"
    if not isinstance(answer, str) and not math.isfinite(answer):
        return f"error: answer must be a finite number, got {answer}"
    return None


def submission(episode: Any) -> str | None:
    """The answer line of a valid ``submit_answer`` call among the calls of an ``Episode``'s last turn (those past
    ``max_parallel_calls`` too: the 0.5B model writes ``read_page`` and ``submit_answer`` in one turn), when the
    sample was offered the tool (else such a call is an unknown tool's, answered as one)."""
    tool = episode.tool_session.tools.get(NAME) if episode.tool_session is not None else None
    return None if tool is None else submitted_answer(tool.tool_schema, episode.turn_calls)


class SubmitAnswerTool(BaseTool):
    """verl tool around ``submit_answer``; the pack's loops end the trajectory on a valid call instead of running it."""

    knows_answer = False

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        super().__init__(config, tool_schema or schema_from_function(submit_answer))

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Bad arguments come back as what is wrong; valid ones (from a loop that does not end on them) as the
        answer line."""
        if (problem := answer_error(self.tool_schema, parameters)) is not None:
            return ToolResponse(text=problem), 0.0, {"error": "bad_arguments"}
        return ToolResponse(text=answer_line(parameters["answer"])), 0.0, {}
