"""One JSONL record per trajectory: what the rollout driver writes and the viewer reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from extensions.errors import TrajectoryFileError

THINK_RE = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
SCHEMA = "verl-longflow/trajectory/v1"


class ToolCallRecord(BaseModel):
    """One tool call and what it returned."""

    name: str
    """Tool name as the model wrote it."""
    arguments: str
    """Arguments as a JSON string, as parsed from the model's text."""
    result: str | None = None
    """The tool's text result before any truncation (None if the call never ran)."""
    error: str | None = None
    """None, or unknown_tool / bad_arguments / timeout / time_budget / exception."""
    latency_s: float = 0.0
    """Wall time of the call."""
    reward: float | None = None
    """The tool's step reward, if it gave one."""
    executed: bool | None = None
    """The tool ran the call (None in records written before this field)."""
    succeeded: bool | None = None
    """The call ran without error (``python_exec``: exit status 0, in time)."""


class CodeCallRecord(ToolCallRecord):
    """A code block run inside an assistant turn (code-fence format); its output is part of the turn."""

    span: tuple[int, int]
    """Half-open token range of the inserted ```` ```output ```` block in ``response_ids`` (mask 0)."""


class TurnRecord(BaseModel):
    """One turn of the trace, located in the response tokens."""

    role: str
    """assistant, tool or user."""
    span: tuple[int, int]
    """Half-open token range ``[start, end)`` in ``response_ids`` (empty if nothing was appended)."""
    text: str
    """The turn's decoded tokens (special tokens kept: they are what the model saw)."""
    visible_text: str = ""
    """Assistant text with thinking removed; for user turns, the user's message."""
    thinking: str = ""
    """Content of ``<think>`` blocks (assistant turns only)."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Tool calls made (assistant turn) or run (tool turn)."""
    malformed_tool_calls: list[str] = Field(default_factory=list)
    """What was wrong with calls that could not be parsed, as told to the model."""
    code_calls: list[CodeCallRecord] = Field(default_factory=list)
    """Code blocks run inside this assistant turn, in order (code-fence format)."""
    score: float | None = None
    """The interaction's score for this user turn."""
    latency_s: float = 0.0
    """Generation, tool or interaction wall time."""
    trained: bool = False
    """Whether any token of the turn has mask 1."""
    fold: bool = False
    """Context folding: the user message asking for a summary (not the user's)."""
    summary: bool = False
    """Context folding: the assistant turn writing the summary (not counted as an assistant turn)."""
    summary_tagged: bool | None = None
    """Context folding, the summary turn: whether the summary was closed inside ``<summary>`` tags (with the
    fold's ``summary_prefix``, the loop wrote the opening tag); None on other turns."""


class SegmentRecord(BaseModel):
    """An earlier segment of a folded trajectory (``folding_workflow``); the record itself is the last."""

    prompt_ids: list[int]
    """The segment's prompt: the sample's messages plus the summary carried over (the first: the sample's)."""
    response_ids: list[int]
    response_mask: list[int]
    logprobs: list[float] | None = None
    turns: list[TurnRecord]
    """Its turns, spans into its own ``response_ids``; it ends with the fold request and the summary."""
    fold_trigger: str | None = None
    """Why it was folded: ``context`` (the trigger fraction of the window) or ``budget``."""
    summary_tokens: int = 0


class TrajectoryRecord(BaseModel):
    """A whole trajectory."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(SCHEMA, alias="schema")
    """Format tag; the viewer refuses files without it."""
    index: int
    """Sample index in the dataset (``extra_info.index`` if present)."""
    agent_name: str
    """The agent loop that produced it."""
    data_source: str | None = None
    """The dataset's data_source column."""
    ground_truth: str | None = None
    """``reward_model.ground_truth`` of the sample, if any."""
    raw_prompt: list[dict[str, Any]]
    """The prompt messages."""
    interaction: str | None = None
    """The interaction (user) that took part, by name."""
    tools_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The sample's tools_kwargs."""
    opening_message: str | None = None
    """A user message the interaction added before the first generation (environments)."""
    turns: list[TurnRecord]
    """Turn by turn, in order."""
    prompt_ids: list[int]
    """Prompt token ids."""
    response_ids: list[int]
    """Response token ids: assistant, tool and user tokens, unpadded."""
    response_mask: list[int]
    """1 = trained (generated by the model), 0 = context."""
    logprobs: list[float] | None = None
    """Rollout log-probs per response token (0 for context tokens)."""
    termination_reason: str
    """One of ``records_schema.TERMINATION_REASONS``: final_answer, interaction_done, max_assistant_turns,
    max_tool_rounds, max_user_turns, response_budget, prompt_too_long, time_budget, repeat_loop, max_segments,
    folded (a segment's, not the trajectory's) or error."""
    error: str | None = None
    """The error or detail behind the termination reason."""
    turn_scores: list[float] = Field(default_factory=list)
    """Interaction score per user turn."""
    tool_rewards: list[float] = Field(default_factory=list)
    """Reward per tool call that gave one."""
    reward: float | None = None
    """Final reward from the reward function (None if none was configured)."""
    reward_extra_info: dict[str, float] = Field(default_factory=dict)
    """Every piece of the reward, by name."""
    timings: dict[str, float] = Field(default_factory=dict)
    """generate_sequences and tool_calls seconds."""
    replayed: bool = False
    """True if written by ``--replay``."""
    segments: list[SegmentRecord] = Field(default_factory=list)
    """A folded trajectory's earlier segments, in order (empty when it never folded); the fields above
    are its last segment's."""


def split_thinking(text: str) -> tuple[str, str]:
    """(visible text, thinking) of an assistant message."""
    thinking = "\n".join(m.strip() for m in THINK_RE.findall(text))
    return THINK_RE.sub("", text).strip(), thinking


def write_jsonl(records: list[TrajectoryRecord], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for record in records:
            f.write(record.model_dump_json(by_alias=True) + "\n")


def read_jsonl(path: str | Path) -> list[TrajectoryRecord]:
    """Read trajectories; anything else is a TrajectoryFileError naming the path and line."""
    path = Path(path)
    if not path.is_file():
        raise TrajectoryFileError(f"{path}: no such file (expected a trajectories .jsonl from extensions.rollout)")
    records = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrajectoryFileError(
                f"{path}:{lineno}: not JSON ({exc.msg}); expected one trajectory per line"
            ) from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise TrajectoryFileError(
                f'{path}:{lineno}: not a trajectory record (expected a JSON object with "schema": "{SCHEMA}")'
            )
        try:
            records.append(TrajectoryRecord.model_validate(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise TrajectoryFileError(f"{path}:{lineno}: bad trajectory record: {where}: {first['msg']}") from None
    if not records:
        raise TrajectoryFileError(f"{path}: empty; expected one trajectory record per line")
    return records
