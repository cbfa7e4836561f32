"""The ``fold`` tool: the policy asks to fold its own context (``folding_workflow``, ``extensions/folding_loop.py``).

Offered like any tool (listed in the tool YAML, as ``tool_configs/ledger.yaml`` does, and in a sample's
``tool_selection``), a call to it is never run by a folding loop: the loop folds instead (trigger
``tool``): the model is asked for a summary of its progress, and the next segment starts from the task
and the summary. The turn's other calls are not run (the summary says what was going on). In the last
segment the call is answered with an error that says no fold is left. Run by any other loop, it answers
that this loop does not fold. Reward per call: none.
"""

from __future__ import annotations

from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.tools.schema import schema_from_function

NAME = "fold"
NOT_FOLDING = "error: fold needs the folding_workflow agent loop; this loop keeps its whole context"


def fold() -> str:
    """Clear your context when it is getting long: you will be asked for a summary of your progress so far,
    and the task goes on from the task and that summary."""
    return NOT_FOLDING


class FoldTool(BaseTool):
    """verl tool around ``fold``; a folding loop intercepts its calls."""

    knows_answer = False

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        super().__init__(config, tool_schema or schema_from_function(fold))

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Only reached from a loop that does not fold: says so."""
        return ToolResponse(text=fold()), 0.0, {"error": "not_folding"}
