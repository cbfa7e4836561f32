"""Tools done right for one trajectory.

verl 0.9's ToolAgentLoop creates and releases a BaseTool instance on EVERY call, has no
timeout and no concurrency control. A ``ToolSession`` instead:

1. creates one instance per tool per trajectory, on first use, with the sample's
   ``tools_kwargs[<tool>].create_kwargs``, and releases all of them in ``close()``;
2. cancels a call after ``timeout_s``, or when the trajectory's ``max_trajectory_s`` runs out, and tells the
   model so;
3. caps how many calls of each tool run at once, per loop entry and event loop;
4. checks arguments against the tool's JSON schema before calling, so the model is told
   exactly which argument was missing, unknown or of the wrong type.

``LongWorkflowAgent`` (extensions/custom_rollouts.py) opens one per trajectory on the
sample's tools (``select_tools``: ``extra_info.tool_selection``), runs a round with
``run_calls``, turns the outcomes into tool messages with ``result_messages`` and closes the
session in ``episode.close_episode``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verl.tools.function_tool import FunctionTool, normalize_function_tool_return

from extensions.errors import ConfigError, SampleError, choices
from extensions.token_text import truncate_to_tokens

logger = logging.getLogger(__name__)

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass
class ToolOutcome:
    """What one tool call produced."""

    name: str
    arguments: str
    text: str
    reward: float | None = None
    latency_s: float = 0.0
    error: str | None = None
    """None when the tool ran; else unknown_tool, bad_arguments, timeout (also: cut at the trajectory's time budget),
    time_budget (not run: the budget had run out), exception, limit, or the raised error's ``kind``."""
    metrics: dict[str, Any] | None = None
    """The tool's own metrics (``python_exec``: exit_code, timed_out, killed_reason, duration_s)."""

    @property
    def executed(self) -> bool:
        """The tool ran the call (its arguments were accepted and nothing stopped it from starting)."""
        return self.error in (None, "timeout") and not (self.metrics or {}).get("error")

    @property
    def succeeded(self) -> bool:
        """The tool ran the call and reported no failure (``python_exec``: exit status 0, in time)."""
        metrics = self.metrics or {}
        failed = metrics.get("error") or metrics.get("timed_out") or metrics.get("exit_code", 0) != 0
        return self.error is None and not failed

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "latency_s": round(self.latency_s, 6),
            "reward": self.reward,
            "error": self.error,
            "executed": self.executed,
            "succeeded": self.succeeded,
            "result": self.text,
        }


NOT_RUN = "Tool '{name}' was not run: the trajectory's time budget (max_trajectory_s) ran out."


def _left(deadline: float) -> float:
    return deadline - time.monotonic()


async def acquire_within(semaphore: asyncio.Semaphore, timeout: float | None) -> bool:
    """Acquire ``semaphore`` waiting at most ``timeout`` seconds (None: as long as it takes); True when it is held.

    Not ``asyncio.wait_for(semaphore.acquire(), timeout)``: before Python 3.12 that can drop a permit acquired just as
    the timeout fires. Here a permit acquired after giving up (or after the caller was cancelled) is given back.
    """
    if timeout is None or not semaphore.locked():
        await semaphore.acquire()  # a free slot is taken without waiting
        return True
    waiter = asyncio.ensure_future(semaphore.acquire())
    try:
        await asyncio.wait({waiter}, timeout=max(timeout, 0.0))
    except BaseException:
        _give_up(semaphore, waiter)
        raise
    if waiter.done():
        return True
    _give_up(semaphore, waiter)
    return False


def _give_up(semaphore: asyncio.Semaphore, waiter: asyncio.Future) -> None:
    waiter.cancel()  # Semaphore.acquire passes a wake-up it could not use on to the next waiter
    waiter.add_done_callback(lambda done: None if done.cancelled() else semaphore.release())


_PARAMETER_SCHEMAS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def parameters_schema(tool: Any) -> dict[str, Any]:
    """The tool's JSON-schema ``parameters`` as a dict, computed once per tool object."""
    schema = _PARAMETER_SCHEMAS.get(tool)
    if schema is None:
        schema = _PARAMETER_SCHEMAS[tool] = tool.tool_schema.function.parameters.model_dump(exclude_none=True)
    return schema


_LIMITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, int], asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop: one semaphore per (loop entry, tool, limit)."""


def tool_semaphore(owner: str, tool: str, limit: int) -> asyncio.Semaphore:
    """The semaphore that caps ``tool`` for the loop entry ``owner`` on the running event loop.

    Trajectories of one entry share it; another entry (or the same entry with another cap) gets its
    own. Tables of closed event loops are dropped, so a new loop never inherits a dead loop's state.
    """
    loop = asyncio.get_running_loop()
    _drop_closed_loops()
    table = _LIMITS.setdefault(loop, {})
    key = (owner, tool, limit)
    semaphore = table.get(key)
    if semaphore is None:
        semaphore = table[key] = asyncio.Semaphore(limit)
    return semaphore


def _drop_closed_loops() -> None:
    # A contended semaphore holds its loop, so the weak keys alone would keep closed loops' tables.
    for dead in [loop for loop in _LIMITS if loop.is_closed()]:
        del _LIMITS[dead]


def live_semaphores() -> int:
    """How many tool semaphores are kept, after dropping closed event loops' tables (for leak checks)."""
    _drop_closed_loops()
    return sum(len(table) for table in _LIMITS.values())


def check_arguments(schema: dict[str, Any], arguments: Any, tool: str) -> str | None:
    """Return a model-facing message if ``arguments`` do not fit ``schema``, else None."""
    if not isinstance(arguments, dict):
        return f"Arguments for '{tool}' must be a JSON object, got {type(arguments).__name__}."
    params = schema.get("properties") or {}
    missing = [name for name in schema.get("required") or [] if name not in arguments]
    if missing:
        return f"Missing required argument(s) for '{tool}': {', '.join(missing)}. Expected: {sorted(params)}."
    unknown = [name for name in arguments if params and name not in params]
    if unknown:
        return f"Unknown argument(s) for '{tool}': {', '.join(unknown)}. Expected: {sorted(params)}."
    for name, value in arguments.items():
        expected = (params.get(name) or {}).get("type")
        types = JSON_TYPES.get(expected) if isinstance(expected, str) else None
        if types and (not isinstance(value, types) or (expected != "boolean" and isinstance(value, bool))):
            return f"Argument '{name}' of '{tool}' must be of type {expected}, got {type(value).__name__}."
    return None


class ToolSession:
    """The tools of one trajectory."""

    def __init__(
        self,
        tools: dict[str, Any],
        tools_kwargs: dict[str, Any] | None,
        *,
        timeout_s: float,
        concurrency: dict[str, int],
        default_concurrency: int,
        owner: str = "",
        time_left: Callable[[], float] | None = None,
    ):
        self.tools = tools
        self.tools_kwargs = tools_kwargs or {}
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.default_concurrency = default_concurrency
        self.owner = owner
        """The loop entry whose caps these are; entries never share a semaphore."""
        self.time_left = time_left
        """Seconds left of the trajectory's ``max_trajectory_s`` (``time_budget.time_left``); None: no bound."""
        self.instances: dict[str, str] = {}
        self._creating: dict[str, asyncio.Lock] = {}

    async def call(self, name: str, arguments: str, agent_data: Any = None) -> ToolOutcome:
        """Run one call; never raises (except cancellation)."""
        start = time.perf_counter()
        outcome = await self._call(name, arguments, agent_data)
        outcome.latency_s = time.perf_counter() - start
        return outcome

    async def _call(self, name: str, arguments: str, agent_data: Any) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            text = f"Unknown tool '{name}'. Available tools: {', '.join(sorted(self.tools)) or '(none)'}."
            return ToolOutcome(name, arguments, text, error="unknown_tool")
        try:
            parsed = json.loads(arguments)
        except (json.JSONDecodeError, TypeError) as exc:
            return ToolOutcome(
                name, arguments, f"Arguments for '{name}' are not valid JSON: {exc}.", error="bad_arguments"
            )
        problem = check_arguments(parameters_schema(tool), parsed, name)
        if problem:
            return ToolOutcome(name, arguments, problem, error="bad_arguments")
        limit = self.concurrency.get(name, self.default_concurrency)
        deadline = self._deadline()
        semaphore = tool_semaphore(self.owner, name, limit)
        # the wait for a slot counts against the trajectory's time budget too
        if not await acquire_within(semaphore, None if deadline is None else _left(deadline)):
            return ToolOutcome(name, arguments, NOT_RUN.format(name=name), error="time_budget")
        try:
            left = None if deadline is None else _left(deadline)
            if left is not None and left <= 0:
                return ToolOutcome(name, arguments, NOT_RUN.format(name=name), error="time_budget")
            budget_first = left is not None and left < self.timeout_s
            try:
                response, reward, metrics = await asyncio.wait_for(
                    self._execute(tool, parsed, agent_data), timeout=left if budget_first else self.timeout_s
                )
            except asyncio.TimeoutError:
                if budget_first:
                    text = f"Tool '{name}' was cancelled: the trajectory's time budget (max_trajectory_s) ran out."
                else:
                    text = f"Tool '{name}' timed out after {self.timeout_s:g} s and was cancelled."
                return ToolOutcome(name, arguments, text, error="timeout")
            except Exception as exc:  # a tool bug is the model's observation, not a crash
                logger.warning("tool %s raised %s: %s", name, type(exc).__name__, exc)
                text = f"Tool '{name}' failed: {type(exc).__name__}: {exc}"
                return ToolOutcome(name, arguments, text, error=str(getattr(exc, "kind", "exception")))
        finally:
            semaphore.release()
        if response.image or response.video:
            text = f"Tool '{name}' returned images or video, which long_workflow does not support."
            return ToolOutcome(name, arguments, text, error="exception")
        return ToolOutcome(name, arguments, response.text or "", reward=reward, metrics=dict(metrics or {}))

    def _deadline(self) -> float | None:
        """``time.monotonic()`` when the trajectory's time budget runs out (the budget's clock read once a call)."""
        return None if self.time_left is None else time.monotonic() + self.time_left()

    async def _execute(self, tool: Any, parsed: dict[str, Any], agent_data: Any) -> tuple[Any, Any, Any]:
        if isinstance(tool, FunctionTool):
            return normalize_function_tool_return(await tool.call(parsed))
        instance_id = self.instances.get(tool.name) or await self._create(tool)
        return await tool.execute(instance_id, parsed, agent_data=agent_data)

    async def _create(self, tool: Any) -> str:
        # One instance per tool, also when a round's parallel first calls reach here together.
        async with self._creating.setdefault(tool.name, asyncio.Lock()):
            if tool.name not in self.instances:
                create_kwargs = (self.tools_kwargs.get(tool.name) or {}).get("create_kwargs") or {}
                self.instances[tool.name], _ = await tool.create(create_kwargs=dict(create_kwargs))
        return self.instances[tool.name]

    async def close(self) -> list[str]:
        """Release every instance; returns the problems met (also logged), never raises."""
        problems = []
        for name, instance_id in list(self.instances.items()):
            release_kwargs = (self.tools_kwargs.get(name) or {}).get("release_kwargs") or {}
            try:
                await asyncio.wait_for(self.tools[name].release(instance_id, **release_kwargs), self.timeout_s)
            except Exception as exc:
                problems.append(f"release of tool '{name}' failed: {type(exc).__name__}: {exc}")
                logger.warning(problems[-1])
        self.instances.clear()
        return problems


def select_tools(
    tools: dict[str, Any], extra_info: dict[str, Any] | None, *, sample: str, default: list[str] | None = None
) -> dict[str, Any]:
    """The sample's tools: ``extra_info.tool_selection``, else the loop's ``default`` selection, else all of them.

    An empty selection (``--tools ''`` in the data preparation) means no tools at all.
    """
    selection = (extra_info or {}).get("tool_selection")
    if selection is None:
        selection = default
    if selection is None:
        return tools
    unknown = [name for name in selection if name not in tools]
    if unknown:
        raise SampleError(
            f"sample {sample}: extra_info.tool_selection names unknown tool(s) {unknown}; "
            f"configured tools: {choices(tools)}"
        )
    return {name: tools[name] for name in selection}


def check_tool_selection(selection: list[str] | None, tools: dict[str, Any], *, entry: str) -> None:
    """A loop entry's ``tool_selection`` names configured tools only (else a ConfigError naming them)."""
    if unknown := [t for t in selection or [] if t not in tools]:
        raise ConfigError(f"agent loop {entry!r}: tool_selection {unknown} not configured; tools: {choices(tools)}")


def tool_schemas(tools: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tools' OpenAI schemas as the chat template takes them; None without tools."""
    return [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools.values()] or None


async def run_calls(session: ToolSession, calls: list[Any], agent_data: Any) -> list[ToolOutcome]:
    """Run one round's calls (``FunctionCall`` s) at once; outcomes in call order."""
    return list(await asyncio.gather(*(session.call(c.name, c.arguments, agent_data) for c in calls)))


def tool_message(text: str, tool_call_id: str | None = None) -> dict[str, Any]:
    """A ``tool`` chat message (with the call's id when the format has one)."""
    message = {"role": "tool", "content": text}
    if tool_call_id is not None:
        message["tool_call_id"] = tool_call_id
    return message


def result_messages(
    tokenizer: Any, outcomes: list[ToolOutcome], calls: list[Any], parse_errors: list[str], max_tokens: int | None
) -> list[dict[str, Any]]:
    """One message per outcome (cut to ``max_tokens`` tokens if set), then one per parse error."""
    messages = [
        tool_message(truncate_to_tokens(tokenizer, o.text, max_tokens) if max_tokens else o.text, c.tool_call_id)
        for o, c in zip(outcomes, calls, strict=True)
    ]
    return messages + [tool_message(error) for error in parse_errors]
