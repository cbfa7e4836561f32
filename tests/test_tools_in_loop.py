"""Tools inside LongWorkflowAgent: lifecycle, timeout, concurrency cap, errors, budget."""

from __future__ import annotations

import json

import pytest

from tests.conftest import RESPONSE_LENGTH, Row, register_loop, run_batch, sample
from tests.fixtures import tools as tracked
from tests.test_long_workflow import IM_END, tool_call, tool_span_text


@pytest.fixture(autouse=True)
def _reset_tools():
    tracked.reset()


async def test_one_instance_per_trajectory_released_also_on_error(worker):
    loop = register_loop("lw_life")
    script = {
        "L-ok": [tool_call("echo", text="1"), tool_call("echo", text="2"), "done"],
        "L-err": [tool_call("echo", text="1"), "<broken>"],
    }
    # the second sample's server dies on its 2nd turn (script too short -> IndexError after 'broken')
    script["L-err"] = [tool_call("echo", text="1"), tool_call("echo", text="2")]
    out = await run_batch(worker, script, [sample("L-ok", loop), sample("L-err", loop)])
    ok, err = Row(out, 0), Row(out, 1)
    assert ok.reason == "final_answer" and err.reason == "error"
    assert err.extras["error"] == "IndexError: script 'L-err' has 2 replies; turn 2 was requested"
    creates = [e for e in tracked.LIFECYCLE if e[0] == "create"]
    releases = [e for e in tracked.LIFECYCLE if e[0] == "release"]
    executes = [e for e in tracked.LIFECYCLE if e[0] == "execute"]
    assert len(creates) == 2 and sorted(creates) == sorted(("create", *r[1:]) for r in releases)
    assert len(executes) == 4  # two calls per trajectory, on that trajectory's one instance
    assert ok.tool_rewards == [1.0, 1.0]


async def test_timeout_cancels_and_tells_the_model(worker, tokenizer):
    loop = register_loop("lw_timeout", tool_timeout_s=0.05)
    script = {"T-slow": [tool_call("slow", text="zzz"), "gave up"]}
    out = await run_batch(worker, script, [sample("T-slow", loop)])
    row = Row(out, 0)
    tool_turn = row.extras["turns"][1]
    assert tool_turn["tool_calls"][0]["error"] == "timeout"
    assert tokenizer.decode(row.span(tool_turn)[0]) == tool_span_text(
        "Tool 'slow' timed out after 0.05 s and was cancelled."
    )
    assert row.reason == "final_answer" and row.extras["num_tool_errors"] == 1


async def test_per_tool_concurrency_cap(worker):
    loop = register_loop("lw_cap", tool_concurrency={"slow": 2}, max_parallel_calls=4)
    calls = "".join(tool_call("slow", text=f"c{i}") for i in range(4))
    script = {f"C{i}": [calls, "ok"] for i in range(3)}
    out = await run_batch(worker, script, [sample(f"C{i}", loop) for i in range(3)])
    assert [Row(out, i).reason for i in range(3)] == ["final_answer"] * 3
    assert tracked.PEAK["slow"] == 2  # 12 concurrent calls, never more than 2 running


async def test_tool_errors_become_observations(worker, tokenizer):
    loop = register_loop("lw_errs", max_parallel_calls=4)
    bad_json = '<tool_call>\n{"name": "echo", "arguments": "{not json"}\n</tool_call>'
    replies = [
        tool_call("echo", text="boom")
        + tool_call("nope", text="x")
        + tool_call("echo", wrong="x")
        + '<tool_call>\n{"name": "echo", "arguments": {"text": 5}}\n</tool_call>',
        bad_json,
        "fine",
    ]
    out = await run_batch(worker, {"E": replies}, [sample("E", loop)])
    row = Row(out, 0)
    first = row.extras["turns"][1]
    assert [c["error"] for c in first["tool_calls"]] == ["exception", "unknown_tool", "bad_arguments", "bad_arguments"]
    assert tokenizer.decode(row.span(first)[0]) == tool_span_text(
        "Tool 'echo' failed: ValueError: boom requested",
        "Unknown tool 'nope'. Available tools: echo, slow.",
        "Missing required argument(s) for 'echo': text. Expected: ['text'].",
        "Argument 'text' of 'echo' must be of type string, got int.",
    )
    second = row.extras["turns"][3]
    assert second["tool_calls"][0]["error"] == "bad_arguments"
    assert row.reason == "final_answer" and row.extras["num_tool_errors"] == 5


async def test_result_shrunk_to_fit_never_dropped(worker, tokenizer):
    long_text = " ".join(f"w{i}" for i in range(400))
    call_tokens = len(tokenizer.encode(tool_call("echo", text=long_text) + IM_END, add_special_tokens=False))
    reserve = RESPONSE_LENGTH - call_tokens - 100  # 100 tokens of room for a ~1,200-token result
    loop = register_loop("lw_fit", reserve_final_tokens=reserve)
    out = await run_batch(worker, {"F": [tool_call("echo", text=long_text), "short"]}, [sample("F", loop)])
    row = Row(out, 0)
    tool_turn = row.extras["turns"][1]
    text = tokenizer.decode(row.span(tool_turn)[0])
    assert text.startswith("\n<|im_start|>user\n<tool_response>\necho: w0 w1")
    assert text.endswith(
        "...(truncated to fit the response budget)\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert tool_turn["span"][1] <= RESPONSE_LENGTH - reserve  # the reserve stayed free
    assert row.reason == "final_answer" and tokenizer.decode(row.span(row.extras["turns"][2])[0]) == "short" + IM_END


async def test_no_room_means_tools_are_not_run(worker):
    loop = register_loop("lw_noroom", reserve_final_tokens=RESPONSE_LENGTH - 20)
    out = await run_batch(worker, {"N": [tool_call("echo", text="x")]}, [sample("N", loop)])
    row = Row(out, 0)
    assert row.reason == "response_budget"
    assert row.extras["error"] == "no room left for tool results; tools were not run"
    assert not [e for e in tracked.LIFECYCLE if e[0] == "execute"]


async def test_calls_over_the_parallel_cap_are_reported_not_dropped(worker, tokenizer):
    loop = register_loop("lw_par1", max_parallel_calls=1)
    script = {"P": [tool_call("echo", text="a") + tool_call("echo", text="b"), "ok"]}
    out = await run_batch(worker, script, [sample("P", loop)])
    row = Row(out, 0)
    assert tokenizer.decode(row.span(row.extras["turns"][1])[0]) == tool_span_text(
        "echo: a", "Tool call 'echo' was not run: at most 1 tool call(s) per turn."
    )


async def test_tool_selection_limits_tools_per_sample(worker, tokenizer):
    loop = register_loop("lw_sel")
    script = {"S": [tool_call("slow", text="x"), "ok"]}
    out = await run_batch(worker, script, [sample("S", loop, extra_info={"tool_selection": ["echo"]})])
    row = Row(out, 0)
    assert row.extras["turns"][1]["tool_calls"][0]["error"] == "unknown_tool"
    assert "Available tools: echo." in tokenizer.decode(row.span(row.extras["turns"][1])[0])
    assert json.loads(row.extras["turns"][1]["tool_calls"][0]["arguments"]) == {"text": "x"}


async def test_two_entries_with_different_caps_for_one_tool_each_get_their_own(worker):
    two = register_loop("lw_cap2", tool_concurrency={"slow": 2}, max_parallel_calls=4)
    one = register_loop("lw_cap1", tool_concurrency={"slow": 1}, max_parallel_calls=4)
    other_one = register_loop("lw_cap1b", tool_concurrency={"slow": 1}, max_parallel_calls=4)
    script = {m: ["".join(tool_call("slow", text=f"{m[-1]}{i}") for i in range(4)), "ok"] for m in ("Da", "Db", "Dc")}
    samples = [sample("Da", two), sample("Db", one), sample("Dc", other_one)]
    out = await run_batch(worker, script, samples)  # one batch: the three entries' calls run at the same time
    assert [Row(out, i).reason for i in range(3)] == ["final_answer"] * 3
    assert (tracked.PEAK["slow:a"], tracked.PEAK["slow:b"], tracked.PEAK["slow:c"]) == (2, 1, 1)
    assert tracked.PEAK["slow"] == 4  # 2 + 1 + 1: no entry waited on another's semaphore


async def test_parallel_first_calls_share_one_instance():
    """A round's calls to a tool not yet created (its create awaits) make one instance, released once."""
    from extensions.tool_session import ToolSession, run_calls
    from tests.fixtures.tools import TrackedTool

    tool = TrackedTool({"name": "echo", "create_sleep_s": 0.05})
    session = ToolSession({"echo": tool}, None, timeout_s=5, concurrency={}, default_concurrency=8)
    calls = [type("Call", (), {"name": "echo", "arguments": json.dumps({"text": t})}) for t in "xyz"]
    outcomes = await run_calls(session, calls, None)
    assert [o.text for o in outcomes] == ["echo: x", "echo: y", "echo: z"]
    assert await session.close() == []
    events = [e[0] for e in tracked.LIFECYCLE]
    assert events == ["create", "execute", "execute", "execute", "release"]
    assert len({e[2] for e in tracked.LIFECYCLE}) == 1


def test_a_new_event_loop_never_inherits_a_closed_loops_semaphore():
    import asyncio

    from extensions.tool_session import _LIMITS, live_semaphores, tool_semaphore

    async def take(limit: int) -> asyncio.Semaphore:
        return tool_semaphore("entry", "slow", limit)

    first = asyncio.run(take(8))
    for _ in range(20):  # ids of closed loops are reused by new ones; their tables must be gone
        second = asyncio.run(take(2))
        assert second is not first and second._value == 2
        first = second

    async def tables_kept() -> int:
        await asyncio.wait_for(tool_semaphore("entry", "slow", 1).acquire(), 1)  # binds it to this loop
        return len(_LIMITS)

    assert asyncio.run(tables_kept()) == 1  # only the running loop's
    assert live_semaphores() == 0

    async def contended() -> asyncio.Semaphore:
        semaphore = tool_semaphore("entry", "slow", 1)
        await semaphore.acquire()
        waiter = asyncio.ensure_future(semaphore.acquire())
        await asyncio.sleep(0)
        semaphore.release()
        await waiter
        semaphore.release()
        return semaphore

    held = asyncio.run(contended())
    assert held._loop is not None  # a contended semaphore holds its (now closed) loop ...
    assert live_semaphores() == 0 and len(_LIMITS) == 0  # ... yet its table is gone
