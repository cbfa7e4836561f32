"""``max_trajectory_s`` (extensions/time_budget.py) through verl's real AgentLoopWorker, with the clock scripted."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from extensions import time_budget
from extensions.code_fence import output_block
from extensions.custom_rewards import compute_score
from extensions.errors import ConfigError
from extensions.loop_settings import parse_settings
from extensions.records_schema import Reason
from tests.conftest import ROOT, Row, build_worker, register_loop, run_batch, sample
from tests.fixtures import tools as tracked


def tool_call(name: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def scripted_clock(monkeypatch: pytest.MonkeyPatch, offsets: list[float]) -> list[float]:
    """Each read of the clock is now + the next offset (the last one repeats); returns the offsets read."""
    read: list[float] = []
    pending: Iterator[float] = iter(offsets)

    def clock() -> float:
        offset = next(pending, offsets[-1])
        read.append(offset)
        return time.time() + offset

    monkeypatch.setattr(time_budget, "clock", clock)
    return read


@pytest.fixture(autouse=True)
def _reset_tools():
    tracked.reset()


async def test_a_trajectory_past_its_time_ends_before_the_next_generation(worker, tokenizer, monkeypatch):
    loop = register_loop("tb_tools", max_trajectory_s=10.0)
    script = {"TB-tools": [tool_call("echo", text="hi"), "Never asked for: #### 4"]}
    read = scripted_clock(monkeypatch, [0.0, 0.0, 0.0, 20.0])  # turn 1, its tool round, the call, then turn 2 late
    row = Row(await run_batch(worker, script, [sample("TB-tools", loop)]), 0)
    extras = row.extras
    assert read == [0.0, 0.0, 0.0, 20.0]
    assert extras["termination_reason"] == "time_budget"
    assert re.fullmatch(r"the trajectory ran 20\.\d s; max_trajectory_s is 10", extras["error"])
    assert [t["role"] for t in extras["turns"]] == ["assistant", "tool"]
    assert extras["num_assistant_turns"] == 1 and extras["num_tool_calls"] == 1
    assert tokenizer.decode(row.response_ids).startswith(tool_call("echo", text="hi"))
    assert "Never asked for" not in tokenizer.decode(row.response_ids)


async def test_with_mask_time_budget_a_stopped_trajectory_keeps_its_tokens_with_mask_0(worker, tokenizer, monkeypatch):
    """The same trajectory with and without the setting: the same tokens; mask 1 on the reply, 0 on the tool's
    output without it, and 0 throughout with it."""
    reply = tool_call("echo", text="hi")
    rows = []
    for name, masked in (("tb_plain", False), ("tb_masked", True)):
        loop = register_loop(name, max_trajectory_s=10.0, mask_time_budget=masked)
        scripted_clock(monkeypatch, [0.0, 0.0, 0.0, 20.0])  # turn 1, its tool round, the call, then turn 2 late
        rows.append(Row(await run_batch(worker, {f"TB-{name}": [reply, "#### 4"]}, [sample(f"TB-{name}", loop)]), 0))
    plain, masked = rows
    assert plain.extras["termination_reason"] == masked.extras["termination_reason"] == "time_budget"
    assert plain.response_ids == masked.response_ids
    n = len(tokenizer.encode(reply, add_special_tokens=False)) + 1  # the reply and its end-of-turn token
    assert plain.mask == [1] * n + [0] * (len(plain.mask) - n)
    assert masked.mask == [0] * len(plain.mask)


async def test_a_tool_round_past_the_time_is_not_run(worker, monkeypatch):
    loop = register_loop("tb_round", max_trajectory_s=10.0)
    read = scripted_clock(monkeypatch, [0.0, 12.5])  # turn 1 starts in time; its tool round does not
    row = Row(await run_batch(worker, {"TB-round": [tool_call("echo", text="hi")]}, [sample("TB-round", loop)]), 0)
    assert read == [0.0, 12.5]
    assert row.extras["termination_reason"] == "time_budget"
    assert [t["role"] for t in row.extras["turns"]] == ["assistant"]
    assert [event for event in tracked.LIFECYCLE if event[0] == "execute"] == []
    assert row.extras["num_executed_calls"] == 0


async def test_a_tool_call_is_cancelled_when_the_time_runs_out(worker):
    """The real clock: the call would hang for an hour (and tool_timeout_s is 30 s); the bound cuts it at 2 s."""
    loop = register_loop("tb_cut", max_trajectory_s=2.0)
    script = {"TB-cut": [tool_call("echo", text="hang"), "Never asked for: #### 4"]}
    started = time.perf_counter()
    row = Row(await run_batch(worker, script, [sample("TB-cut", loop)]), 0)
    assert time.perf_counter() - started < 10.0
    extras = row.extras
    assert extras["termination_reason"] == "time_budget"
    assert re.fullmatch(r"the trajectory ran 2\.\d+ s; max_trajectory_s is 2", extras["error"])
    assert [t["role"] for t in extras["turns"]] == ["assistant", "tool"]
    (call,) = extras["turns"][1]["tool_calls"]
    assert (call["error"], call["executed"], call["succeeded"]) == ("timeout", True, False)
    assert call["result"] == "Tool 'echo' was cancelled: the trajectory's time budget (max_trajectory_s) ran out."
    assert 1.0 < call["latency_s"] < 2.5  # the time left when it started (2 s less the first reply), not 30 s
    assert [event[0] for event in tracked.LIFECYCLE if event[0] == "execute"] == ["execute"]


async def test_a_call_that_would_start_past_the_time_is_not_run(worker, monkeypatch):
    loop = register_loop("tb_late_call", max_trajectory_s=10.0)
    script = {"TB-late-call": [tool_call("echo", text="hi"), "Never asked for: #### 4"]}
    read = scripted_clock(monkeypatch, [0.0, 0.0, 10.5])  # the round starts in time; its call would not
    row = Row(await run_batch(worker, script, [sample("TB-late-call", loop)]), 0)
    assert read == [0.0, 0.0, 10.5, 10.5]
    extras = row.extras
    assert extras["termination_reason"] == "time_budget"
    assert [t["role"] for t in extras["turns"]] == ["assistant", "tool"]
    (call,) = extras["turns"][1]["tool_calls"]
    assert (call["error"], call["executed"]) == ("time_budget", False)
    assert call["result"] == "Tool 'echo' was not run: the trajectory's time budget (max_trajectory_s) ran out."
    assert [event for event in tracked.LIFECYCLE if event[0] == "execute"] == []
    assert extras["num_executed_calls"] == 0


async def test_a_user_turn_past_the_time_is_not_taken(worker, monkeypatch):
    loop = register_loop("tb_user", max_trajectory_s=10.0)
    read = scripted_clock(monkeypatch, [0.0, 10.5])  # the reply starts in time; the user would answer past it
    users = {"name": "scripted", "user_messages": ["Are you sure?"]}
    script = {"TB-user": ["It is 4.", "Never asked for: #### 4"]}
    row = Row(await run_batch(worker, script, [sample("TB-user", loop, interaction_kwargs=users)]), 0)
    assert read == [0.0, 10.5]
    assert row.extras["termination_reason"] == "time_budget"
    assert [t["role"] for t in row.extras["turns"]] == ["assistant"]
    assert row.extras["num_user_turns"] == 0


def timed_session(tool: Any, left_s: float | None, *, timeout_s: float = 30.0, owner: str = "tb-session") -> Any:
    """A trajectory's ToolSession with ``left_s`` of its time budget left from now (None: no bound)."""
    from extensions.tool_session import ToolSession

    deadline = None if left_s is None else time.monotonic() + left_s
    time_left = None if deadline is None else (lambda: deadline - time.monotonic())
    return ToolSession(
        {"echo": tool}, None, timeout_s=timeout_s, concurrency={"echo": 1}, default_concurrency=8, owner=owner,
        time_left=time_left,
    )  # fmt: skip


async def test_under_a_bound_the_tools_own_timeout_still_says_so():
    from tests.fixtures.tools import TrackedTool

    session = timed_session(TrackedTool({"name": "echo"}), 60.0, timeout_s=0.3)
    outcome = await session.call("echo", json.dumps({"text": "hang"}))
    assert (outcome.error, outcome.text) == ("timeout", "Tool 'echo' timed out after 0.3 s and was cancelled.")


async def test_the_wait_for_a_slot_counts_against_the_time():
    """Two trajectories share echo's one slot: the first holds it 1 s; the second, with 0.3 s left, gives up waiting
    and does not run; the slot is then free for a third, once (no permit lost or doubled)."""
    from tests.fixtures.tools import TrackedTool

    tool = TrackedTool({"name": "echo", "sleep_s": 1.0})
    first, second = timed_session(tool, None), timed_session(tool, 0.3)
    running = asyncio.ensure_future(first.call("echo", json.dumps({"text": "a"})))
    await asyncio.sleep(0.05)
    late = await second.call("echo", json.dumps({"text": "b"}))
    assert (late.error, late.executed) == ("time_budget", False)
    assert late.text == "Tool 'echo' was not run: the trajectory's time budget (max_trajectory_s) ran out."
    assert 0.2 < late.latency_s < 0.9
    assert (await running).text == "echo: a"
    assert [event[0] for event in tracked.LIFECYCLE if event[0] == "execute"] == ["execute"]
    third = await timed_session(tool, 0.1).call("echo", json.dumps({"text": "c"}))
    assert (third.error, third.executed) == ("timeout", True)  # it got the slot at once, and ran until cut


async def test_a_slot_acquired_after_giving_up_is_given_back():
    from extensions.tool_session import acquire_within

    slot = asyncio.Semaphore(1)
    await slot.acquire()
    assert await acquire_within(slot, 0.05) is False
    waiting = asyncio.ensure_future(acquire_within(slot, 10.0))  # a caller cancelled while it waits
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slot.release()
    await asyncio.sleep(0.01)
    assert await acquire_within(slot, 0.05) is True  # the one permit is back ...
    assert await acquire_within(slot, 0.05) is False  # ... once


async def test_without_a_bound_the_clock_is_never_read(worker, monkeypatch):
    loop = register_loop("tb_none")

    def fail() -> float:
        raise AssertionError("the clock was read without max_trajectory_s")

    monkeypatch.setattr(time_budget, "clock", fail)
    script = {"TB-none": [tool_call("echo", text="hi"), "#### 4"]}
    row = Row(await run_batch(worker, script, [sample("TB-none", loop)]), 0)
    assert row.extras["termination_reason"] == "final_answer"


@pytest.fixture(scope="module")
def fence_worker(qwen_dir: Any) -> Any:
    experiment = ROOT / "experiments" / "gsm8k_learn"
    return build_worker(
        qwen_dir, tools=experiment / "tools.yaml", agent_loops=experiment / "agent_loops.yaml", tool_format="auto"
    )


async def test_a_code_fence_turn_stops_after_the_block_that_ran_past_the_time(fence_worker, monkeypatch):
    tok = fence_worker.tokenizer
    loop = register_loop("tb_fence", tool_parser="code_fence", max_trajectory_s=10.0, interaction_config_path=None)
    first = "Tickets cost 6 each; 7 people.\n```python\nprint(6 * 7)\n```\n"
    script = {"TB-fence": [first, "So the total is 42.\n#### 42"]}
    read = scripted_clock(monkeypatch, [0.0, 0.0, 11.0])  # the turn and its block start in time; after it, over
    row = Row(await run_batch(fence_worker, script, [sample("TB-fence", loop)]), 0)
    assert read == [0.0, 0.0, 11.0]
    out = output_block("42", after=first)
    expected = [(tok.encode(first, add_special_tokens=False), 1), (tok.encode(out, add_special_tokens=False), 0)]
    assert row.response_ids == [t for ids, _ in expected for t in ids]
    assert row.mask == [m for ids, m in expected for _ in ids]
    extras = row.extras
    assert extras["termination_reason"] == "time_budget"
    assert re.fullmatch(r"the trajectory ran 11\.\d s; max_trajectory_s is 10", extras["error"])
    assert (extras["num_assistant_turns"], extras["num_executed_calls"], extras["num_successful_calls"]) == (1, 1, 1)


def test_a_stopped_trajectory_has_no_answer():
    """The experiments' reward (the bonus paid to right answers only): a stopped reply earns nothing."""
    kwargs = {"mode": "flexible", "w_exec": 0.1, "exec_bonus_cap": 0.2, "exec_bonus_if_correct": True}
    extras = {"termination_reason": "time_budget", "final_answer_text": "#### 72", "num_successful_calls": 1}
    scored = compute_score("longflow/gsm8k", "", "72", {"extras": extras}, **kwargs)
    assert (scored["score"], scored["answer_found"], scored["is_response_budget"]) == (0.0, 0.0, 0.0)
    extras["termination_reason"] = "final_answer"
    assert compute_score("longflow/gsm8k", "", "72", {"extras": extras}, **kwargs)["score"] == pytest.approx(1.1)


def test_masking_needs_a_bound():
    with pytest.raises(ConfigError) as error:
        parse_settings({"mask_time_budget": True}, entry="tb_bad")
    assert str(error.value) == (
        "agent loop 'tb_bad': mask_time_budget masks trajectories ended by max_trajectory_s; set max_trajectory_s too"
    )
    assert parse_settings({"max_trajectory_s": 8.0}, entry="tb_ok").masked_reasons() == {Reason.ERROR}
    both = parse_settings({"max_trajectory_s": 8.0, "mask_time_budget": True}, entry="tb_ok").masked_reasons()
    assert both == {Reason.ERROR, Reason.TIME_BUDGET}


def test_the_bound_must_be_positive():
    with pytest.raises(ConfigError) as error:
        parse_settings({"max_trajectory_s": 0.0}, entry="tb_bad")
    assert str(error.value) == "agent loop 'tb_bad': key 'max_trajectory_s': Input should be greater than 0 (got 0.0)"
