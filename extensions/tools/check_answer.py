"""The ``check_answer`` tool: the model submits its final answer and is told whether it is right.

Each trajectory's instance gets the sample's answer from ``tools_kwargs.check_answer.create_kwargs.
ground_truth``. Answers are compared as numbers after the same normalisation the GSM8K reward uses
(``extensions.rewards.numbers``: ``$1,000.00`` == ``1000``); a non-numeric ground truth is compared as
case-insensitive text. Reward per call: 1.0 correct, 0.0 otherwise. Only ``max_attempts`` answers per
trajectory are graded, so the model cannot search for the answer by guessing.
Tool YAML: ``tool_configs/check_answer.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from extensions.rewards.numbers import normalize_number, numbers_equal
from extensions.tools.schema import (
    bad_arguments,
    create_kwarg,
    missing_create_kwarg,
    parse_tool_config,
    schema_from_function,
)


def check_answer(answer: str | float, ground_truth: str) -> bool:
    """Submit your final answer to the problem and learn whether it is correct.

    Args:
        answer: Your final answer as a plain number, for example "72".
        ground_truth: The sample's correct answer; supplied by the tool, never by the model.
    """
    given = _as_text(answer)
    expected_number, given_number = normalize_number(ground_truth), normalize_number(given)
    if expected_number is None:
        return " ".join(given.split()).casefold() == " ".join(ground_truth.split()).casefold()
    return given_number is not None and numbers_equal(given_number, expected_number)


def _as_text(answer: str | float) -> str:
    if isinstance(answer, float):
        return format(Decimal(repr(answer)), "f")  # 1e-05 -> 0.00001, which the normaliser reads
    return str(answer)


class CheckAnswerConfig(BaseModel):
    """``check_answer``'s config keys."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_attempts: int = Field(1, ge=1)
    """Answers graded per trajectory; later calls are told no attempts are left and earn 0."""


@dataclass
class _Instance:
    ground_truth: str | None
    attempts: int = 0
    solved: bool = False


class CheckAnswerTool(BaseTool):
    """verl tool around ``check_answer``; keeps each trajectory's ground truth and attempt count."""

    knows_answer = True
    """An oracle: ``config_check`` rejects a validation that offers it."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        self.settings = parse_tool_config(CheckAnswerConfig, config, tool="check_answer")
        super().__init__(config, tool_schema or schema_from_function(check_answer, hidden={"ground_truth"}))
        self._instances: dict[str, _Instance] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Start a trajectory's instance; ``create_kwargs={"ground_truth": ...}`` (or ``ground_truth=``)."""
        instance_id = instance_id or str(uuid4())
        ground_truth = create_kwarg(kwargs, "ground_truth")
        self._instances[instance_id] = _Instance(None if ground_truth is None else str(ground_truth))
        return instance_id, ToolResponse()

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Grade ``parameters["answer"]``: ("correct", 1.0) or ("incorrect ...", 0.0); problems come back as text."""
        instance = self._instances.get(instance_id)
        if instance is None or instance.ground_truth is None:
            text = missing_create_kwarg(self.name, "ground_truth", "ground truth")
            return ToolResponse(text=text), 0.0, {"error": "missing_ground_truth"}
        if (bad := bad_arguments(self.tool_schema, parameters)) is not None:
            return bad
        limit = self.settings.max_attempts
        if instance.attempts >= limit:
            text = f"error: no attempts left ({limit} answer{'s' if limit != 1 else ''} per problem)"
            return ToolResponse(text=text), 0.0, {"error": "no_attempts_left", "attempts": instance.attempts}
        instance.attempts += 1
        correct = check_answer(parameters["answer"], instance.ground_truth)
        instance.solved = instance.solved or correct
        metrics = {"correct": correct, "attempts": instance.attempts}
        if correct:
            return ToolResponse(text="correct"), 1.0, metrics
        given, left = _as_text(parameters["answer"]), limit - instance.attempts
        text = "incorrect"
        if normalize_number(given) is None and normalize_number(instance.ground_truth) is not None:
            text += f": {given!r} is not a number"
        text += f" ({left} attempt{'s' if left != 1 else ''} left)" if left else ""
        return ToolResponse(text=text), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """1.0 once the trajectory's instance has been answered correctly, else 0.0."""
        instance = self._instances.get(instance_id)
        return 1.0 if instance is not None and instance.solved else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
