"""Tools and scripted traces of the benchmarks (the tools are named in ``benchmarks/configs/*.yaml``).

- ``RecordedCalculator`` / ``RecordedLookup``: BaseTools that return the result recorded in the
  trace (``tools_kwargs[tool].create_kwargs.results``), so a tool call costs ~nothing.
- ``SleepTool``: awaits ``asyncio.sleep(config.sleep_s)`` and records when each call ran.
- ``Trace``: prompt, assistant replies, per-tool create_kwargs and user turns of one trajectory;
  ``synthetic_trace`` builds the 15-turn agent -> tool -> agent -> user ones, ``gsm8k_traces``
  replays GSM8K solutions (``<<expr=result>>`` -> a ``calculator`` call) as tool use.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

# -- tools -----------------------------------------------------------------------------


def function_schema(name: str, description: str, **params: str) -> OpenAIFunctionToolSchema:
    """An OpenAI function schema whose parameters are all required strings."""
    properties = {p: {"type": "string", "description": d} for p, d in params.items()}
    return OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": list(params)},
            },
        }
    )


class RecordedTool(BaseTool):
    """Answers a call with the result its trace recorded for the call's ``key_param`` value."""

    key_param = "query"

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        super().__init__(config, tool_schema or self.default_schema())
        self._results: dict[str, dict[str, str]] = {}

    @classmethod
    def default_schema(cls) -> OpenAIFunctionToolSchema:
        raise NotImplementedError

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        instance_id, response = await super().create(instance_id)
        self._results[instance_id] = dict((kwargs.get("create_kwargs") or {}).get("results") or {})
        return instance_id, response

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        text = self._results[instance_id].get(str(parameters.get(self.key_param)), "no recorded result")
        return ToolResponse(text=text), None, {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._results.pop(instance_id, None)


class RecordedCalculator(RecordedTool):
    key_param = "expression"

    @classmethod
    def default_schema(cls) -> OpenAIFunctionToolSchema:
        return function_schema("calculator", "Evaluate an arithmetic expression.", expression="e.g. 48/2")


class RecordedLookup(RecordedTool):
    key_param = "query"

    @classmethod
    def default_schema(cls) -> OpenAIFunctionToolSchema:
        return function_schema("lookup", "Look up facts in the knowledge base.", query="what to look up")


class SleepTool(BaseTool):
    """Awaits ``asyncio.sleep(config.sleep_s)``, echoes ``label``, and records (label, start, end) in ``CALLS``."""

    CALLS: list[tuple[str, float, float]] = []

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        super().__init__(config, tool_schema or function_schema("wait", "Wait, then echo.", label="any text"))
        self.sleep_s = float(config.get("sleep_s", 0.2))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        start = time.perf_counter()
        await asyncio.sleep(self.sleep_s)
        self.CALLS.append((str(parameters.get("label")), start, time.perf_counter()))
        return ToolResponse(text=f"waited for {parameters.get('label')}"), None, {}


# -- traces and samples ----------------------------------------------------------------


def tool_call(name: str, **arguments: str) -> str:
    """A hermes tool call, as Qwen2.5 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@dataclass
class Trace:
    """One scripted trajectory: prompt, assistant replies, per-tool create_kwargs, user turns."""

    key: str
    messages: list[dict[str, Any]]
    replies: list[str]
    create_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """tool name -> its create_kwargs, e.g. ``{"calculator": {"results": {"48/2": "24"}}}``."""
    user_messages: list[str] | None = None

    def sample(self, agent_name: str) -> dict[str, Any]:
        """A dataset row for verl's AgentLoopWorker."""
        row: dict[str, Any] = {
            "raw_prompt": self.messages,
            "agent_name": agent_name,
            "tools_kwargs": {tool: {"create_kwargs": kwargs} for tool, kwargs in self.create_kwargs.items()},
        }
        if self.user_messages is not None:
            row["interaction_kwargs"] = {"name": "scripted", "user_messages": self.user_messages}
        return row


WORDS_TEXT = (
    "the result of each step depends on what we found before so check the numbers again and compare "
    "them with the table from the report then write down every value that changed since last time while "
    "keeping track of units totals and remaining budget for the next lookup"
)
WORDS = WORDS_TEXT.split()
GSM_SYSTEM = "You are a careful math solver. Use the calculator for every arithmetic step; end with '#### <answer>'."
ANNOTATION = re.compile(r"<<([^<>=]*)=([^<>]*)>>")
SYSTEM = "You are a careful research agent. Think step by step, use the lookup tool, and answer the user."


def synthetic_trace(index: int, turns: int = 15, words: float = 1.0) -> Trace:
    """agent -> tool -> agent -> user -> ...: odd turns call ``lookup``, even turns answer and get a
    user reply, the last turn answers (the scripted user then ends the episode: interaction_done).
    ``words`` scales every text (1.0: ~150/120-token tool/answer turns, ~70-token tool results)."""
    rng = random.Random(index)
    say = lambda n: " ".join(rng.choice(WORDS) for _ in range(max(1, round(n * words))))  # noqa: E731
    replies, results, users = [], {}, []
    for turn in range(1, turns + 1):
        if turn == turns:
            replies.append(f"<think>{say(60)}</think>Final answer: {say(40)}")
        elif turn % 2:
            query = f"step {turn}: {say(4)}"
            results[query] = say(70)
            replies.append(f"<think>{say(90)}</think>{say(30)}\n{tool_call('lookup', query=query)}")
        else:
            replies.append(f"<think>{say(60)}</think>{say(60)}")
            users.append(say(25))
    prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"[task syn-{index:05d}] {say(30)}"}]
    return Trace(f"syn-{index:05d}", prompt, replies, {"lookup": {"results": results}}, users)


def without_user_turns(trace: Trace) -> Trace:
    """The agent -> tool part of a synthetic trace: its tool-calling turns and its last answer."""
    tool_turns = [r for r in trace.replies[:-1] if "<tool_call>" in r]
    return Trace(trace.key, trace.messages, [*tool_turns, trace.replies[-1]], trace.create_kwargs, None)


def gsm8k_traces(source: str, n: int) -> list[Trace]:
    """The first ``n`` distinct GSM8K solutions with 1-14 annotations, as calculator-using traces.

    ``source``: a GSM8K train file or a Hugging Face id (``extensions.data.sources.read_rows``)."""
    from extensions.data.sources import read_rows

    traces, seen = [], set()
    for row in read_rows(source, split="train", hf_config="main"):
        calls = ANNOTATION.findall(row["answer"])
        if not 1 <= len(calls) <= 14 or row["question"] in seen:
            continue
        seen.add(row["question"])
        replies, pos, key = [], 0, f"gsm-{len(traces):05d}"
        for m in ANNOTATION.finditer(row["answer"]):
            replies.append(row["answer"][pos : m.start()] + tool_call("calculator", expression=m.group(1).strip()))
            pos = m.end()
        replies.append(row["answer"][pos:])
        question = {"role": "user", "content": f"[task {key}] {row['question']}"}
        results = {e.strip(): r.strip() for e, r in calls}
        prompt = [{"role": "system", "content": GSM_SYSTEM}, question]
        traces.append(Trace(key, prompt, replies, {"calculator": {"results": results}}))
        if len(traces) == n:
            break
    return traces
