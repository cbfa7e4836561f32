"""Replay recorded trajectories and check the rebuilt tokens and masks, token for token.

    python -m extensions.rollout experiments/gsm8k_code_verify --replay outputs/rollout/x/trajectories.jsonl

A replay runs verl's real AgentLoopWorker and our agent loops again, but the model's turns
come from the record (``ReplayServer``), tools return their recorded results
(``ReplayTool``) and the user says what it said (``ReplayInteraction``). Everything in
between — parsing, budgets, chat-template rendering, Continuous Token merging, masks — is
recomputed, so any drift in the pipeline shows up as a token or mask mismatch.
Each trajectory is keyed by its request id (the batch column ``trajectory_id``).

No model weights are loaded, only a tokenizer; ``resolve_replay_model`` finds it without
``actor_rollout_ref.model.path`` (see there).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.protocol import DataProto
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.workers.rollout.replica import TokenOutput

from extensions.errors import ConfigError
from extensions.interactions.base import BaseInteraction
from extensions.rollout.convert import row_tokens
from extensions.rollout.data import batch_from_rows
from extensions.rollout.records import SegmentRecord, TrajectoryRecord, read_jsonl, write_jsonl
from extensions.verl_compat import accept_segment_lists, agent_loop_registry

BOOKS: dict[str, dict[str, TrajectoryRecord]] = {}
"""book id -> {trajectory_id: record}; how replay tools and interactions find their record."""


def trajectory_id(position: int) -> str:
    return f"replay-{position}"


class ReplayServer:
    """Returns each trajectory's recorded model output, one generated segment per call, in order.

    A segment is an assistant turn, or, where code blocks ran inside the turn (code-fence format),
    the piece of it between two inserted outputs: what the engine returned between pauses. A folded
    trajectory's calls run through its earlier segments first, each with its own prompt.
    """

    def __init__(self, book: dict[str, TrajectoryRecord]):
        self.book = book
        self.turn: dict[str, int] = {}

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        record = self.book[request_id]
        k = self.turn.get(request_id, 0)
        self.turn[request_id] = k + 1
        calls = generations(record)
        if k >= len(calls):
            raise AssertionError(
                f"{request_id}: replay asks for generated segment {k + 1}, the record has {len(calls)}: run the "
                "replay with the recording run's settings (e.g. the same actor_rollout_ref.rollout.response_length)"
            )
        expected, tokens, logprobs = calls[k]
        if list(prompt_ids) != expected:
            raise AssertionError(
                f"{request_id} segment {k}: prompt differs from the record at token {_first_diff(prompt_ids, expected)}"
            )
        logprobs = logprobs if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=tokens, log_probs=logprobs, extra_fields={})


def generations(record: TrajectoryRecord) -> list[tuple[list[int], list[int], list[float] | None]]:
    """(prompt, generated tokens, their log-probs) of every server call, in order: each segment's
    (``generated_segments``), the earlier segments of a folded trajectory first."""
    calls = []
    for part in [*record.segments, record]:
        for lo, hi in generated_segments(part):
            logprobs = part.logprobs[lo:hi] if part.logprobs else None
            calls.append((part.prompt_ids + part.response_ids[:lo], part.response_ids[lo:hi], logprobs))
    return calls


def generated_segments(record: TrajectoryRecord | SegmentRecord) -> list[tuple[int, int]]:
    """The model-generated spans of ``record`` (or one segment): its assistant turns, split around inline code outputs."""
    segments = []
    for turn in (t for t in record.turns if t.role == "assistant"):
        start = turn.span[0]
        for call in turn.code_calls:
            segments.append((start, call.span[0]))
            start = call.span[1]
        segments.append((start, turn.span[1]))
    return segments


def recorded_calls(record: TrajectoryRecord) -> list[Any]:
    """Every call that ran, in order: code blocks inside assistant turns and tool rounds' calls."""
    calls = []
    for turn in [t for part in [*record.segments, record] for t in part.turns]:
        calls += turn.code_calls if turn.role == "assistant" else turn.tool_calls if turn.role == "tool" else []
    return calls


class ReplayTool(BaseTool):
    """Stands in for a real tool: same name and schema, recorded results."""

    def __init__(self, original: Any, book_id: str):
        super().__init__({"type": "native"}, original.tool_schema)
        self.book_id = book_id
        self.used: dict[str, set[int]] = {}

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        request_id = kwargs["agent_data"].request_id
        record = BOOKS[self.book_id][request_id]
        used = self.used.setdefault(request_id, set())
        arguments = json.dumps(parameters, ensure_ascii=False)
        for n, call in enumerate(recorded_calls(record)):
            if n not in used and call.name == self.name and json.loads(call.arguments) == json.loads(arguments):
                used.add(n)
                return ToolResponse(text=call.result or ""), call.reward, {}
        raise AssertionError(f"{request_id}: no recorded call of {self.name} with {arguments}")


class ReplayInteraction(BaseInteraction):
    """Says what the recorded user said; the instance id is the trajectory's request id."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self.book_id = config["book_id"]
        self.next: dict[str, int] = {}

    def _record(self, instance_id: str) -> TrajectoryRecord:
        return BOOKS[self.book_id][instance_id]

    async def opening_message(self, instance_id: str) -> str | None:
        return self._record(instance_id).opening_message

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any):
        record = self._record(instance_id)
        parts = [*record.segments, record]  # a folded trajectory's user turns; fold requests have no score
        users = [t for part in parts for t in part.turns if t.role == "user" and t.score is not None]
        k = self.next.get(instance_id, 0)
        self.next[instance_id] = k + 1
        turn = users[k]
        stop = turn.span[0] == turn.span[1] and record.termination_reason == "interaction_done"
        return stop, turn.visible_text, float(turn.score or 0.0), {}


def _first_diff(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _batch(records: list[TrajectoryRecord]) -> DataProto:
    return batch_from_rows(
        [
            {
                "raw_prompt": r.raw_prompt,
                "agent_name": f"replay::{r.agent_name}",
                "interaction_kwargs": {"name": r.interaction} if r.interaction else {},
                "tools_kwargs": r.tools_kwargs,
                "extra_info": {"index": r.index},
                "trajectory_id": trajectory_id(i),
            }
            for i, r in enumerate(records)
        ]
    )


def _register_replay_loops(config: DictConfig, records: list[TrajectoryRecord], book_id: str, out_dir: Path) -> None:
    names = sorted({r.interaction for r in records if r.interaction})
    interactions = out_dir / "replay_interactions.yaml"
    interactions.write_text(
        yaml.safe_dump(
            {
                "interaction": [
                    {"name": n, "class_name": f"{__name__}.ReplayInteraction", "config": {"book_id": book_id}}
                    for n in names
                ]
            }
        )
    )
    path = config.actor_rollout_ref.rollout.agent.agent_loop_config_path
    entries = {e["name"]: dict(e) for e in OmegaConf.to_container(OmegaConf.load(path))} if path else {}
    for agent_name in {r.agent_name for r in records}:
        if agent_name not in entries:
            raise ValueError(
                f"cannot replay agent loop {agent_name!r}: not in {path} (only LongWorkflowAgent loops replay)"
            )
        entry = {**entries[agent_name], "interaction_config_path": str(interactions)}
        agent_loop_registry()[f"replay::{agent_name}"] = entry


async def replay(records: list[TrajectoryRecord], config: DictConfig, out_dir: Path) -> tuple[list[str], DataProto]:
    """Re-run ``records``; returns the mismatches (empty when identical) and the output batch."""
    from extensions.verl_config import build_agent_loop_worker

    book_id = str(id(records))
    BOOKS[book_id] = {trajectory_id(i): r for i, r in enumerate(records)}
    out_dir.mkdir(parents=True, exist_ok=True)
    _register_replay_loops(config, records, book_id, out_dir)
    worker = accept_segment_lists(build_agent_loop_worker(config, llm_client=ReplayServer(BOOKS[book_id])))
    worker.tools = [ReplayTool(t, book_id) for t in worker.tools]
    try:
        out = await worker.generate_sequences(_batch(records))
    finally:
        BOOKS.pop(book_id, None)
    problems = []
    columns = out.non_tensor_batch
    for i, record in enumerate(records):
        prompt, response, mask, _ = row_tokens(out, i)
        rebuilt = [(s["prompt_ids"], s["response_ids"], s["response_mask"]) for s in _segments_of(columns, i)]
        recorded = [(s.prompt_ids, s.response_ids, s.response_mask) for s in record.segments]
        if len(rebuilt) != len(recorded):
            problems.append(f"trajectory {record.index}: {len(rebuilt)} segments rebuilt, {len(recorded)} recorded")
        for where, got_part, want_part in [
            *((f"segment {k}", g, w) for k, (g, w) in enumerate(zip(rebuilt, recorded, strict=False))),
            ("", (prompt, response, mask), (record.prompt_ids, record.response_ids, record.response_mask)),
        ]:
            for name, got, want in zip(
                ("prompt_ids", "response_ids", "response_mask"), got_part, want_part, strict=True
            ):
                if list(got) != list(want):
                    problems.append(
                        f"trajectory {record.index}: {where + ' ' if where else ''}{name} differs at position "
                        f"{_first_diff(list(got), list(want))} (lengths {len(got)} vs {len(want)})"
                    )
    return problems, out


def _segments_of(columns: dict[str, Any], i: int) -> list[dict[str, Any]]:
    return list(columns["segments"][i] or []) if "segments" in columns else []


def resolve_replay_model(config: DictConfig, overrides: list[str], trajectories: str) -> Path:
    """Set ``actor_rollout_ref.model.path`` to a directory with the recording model's tokenizer, and return it.

    In order: ``actor_rollout_ref.model.path=`` on the command line; the config's path if it exists;
    the ``model`` that ``summary.json`` beside ``trajectories`` names, if it exists; the embedded
    model's directory if it was built; and for the embedded model's records (or records with no
    summary), the pack's offline Qwen2.5 tokenizer without Qwen3's tokens, which encodes exactly like
    the embedded model's (checked when it is converted; ``<tool_response>`` is four BPE tokens in both).
    """
    from extensions.backends.embedded_model import embedded_model_dir
    from extensions.qwen_tokenizer import cached_qwen_model_dir

    configured = Path(str(config.actor_rollout_ref.model.path)).expanduser()
    candidates, offline = [configured], False
    if not any(o.startswith("actor_rollout_ref.model.path=") for o in overrides):
        summary = Path(trajectories).parent / "summary.json"
        recorded = json.loads(summary.read_text()).get("model") if summary.is_file() else None
        candidates += [*([Path(recorded)] if recorded else []), embedded_model_dir()]
        offline = recorded is None or Path(recorded).name == embedded_model_dir().name
    found = next((c for c in candidates if (c / "config.json").is_file()), None)
    if found is None and offline:
        found = cached_qwen_model_dir(qwen3_tokens=False)
    if found is None:
        raise ConfigError(
            f"replay of {trajectories} needs the tokenizer of the model that wrote it; none of "
            f"{', '.join(str(c) for c in candidates)} is a model directory: pass actor_rollout_ref.model.path=DIR"
        )
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(found)
    return found


def replay_file(
    path: str, config: DictConfig, out_dir: Path, quiet: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> int:
    """CLI entry: print the verdict; exit code 0 if every trajectory rebuilt identically.

    ``quiet``: a context the replay runs in (the driver's, keeping verl's prints off the console)."""
    records = read_jsonl(path)
    replayable = [r for r in records if r.turns and r.termination_reason not in ("error", "prompt_too_long")]
    skipped = len(records) - len(replayable)
    with quiet():
        problems, _ = asyncio.run(replay(replayable, config, out_dir))
    write_jsonl([r.model_copy(update={"replayed": True}) for r in replayable], out_dir / "replayed.jsonl")
    for problem in problems:
        print(problem)
    print(
        f"replayed {len(replayable)} trajectories ({skipped} skipped: errors or prompt_too_long), {len(problems)} mismatch(es)"
    )
    return 1 if problems else 0
