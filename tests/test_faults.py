"""Fault injection: each fault lands on its own trajectory, with its reason and message;
the batch completes and every other trajectory equals a fault-free run."""

from __future__ import annotations

import pytest

from extensions.testing.scripted_server import ServerFault
from tests.conftest import Row, register_loop, run_batch, sample
from tests.fixtures import tools as tracked
from tests.test_long_workflow import tool_call

CLEAN = {
    "clean-1": [tool_call("echo", text="a"), "All good: 1"],
    "clean-2": ["Plain: 2", "Again: 2"],
}


def clean_samples(loop: str) -> list[dict]:
    return [
        sample("clean-1", loop),
        sample("clean-2", loop, interaction_kwargs={"name": "scripted", "user_messages": ["Sure?"]}),
    ]


def comparable(row: Row) -> tuple:
    """Everything of a trajectory except wall-clock latencies and times (``started_at``, ``finished_at``)."""
    turns = [{k: v for k, v in t.items() if k != "latency_s"} for t in row.extras["turns"]]
    for t in turns:
        t["tool_calls"] = [
            {k: v for k, v in c.items() if k != "latency_s"} if isinstance(c, dict) else c
            for c in t.get("tool_calls", [])
        ]
    extras = {k: v for k, v in row.extras.items() if k not in ("turns", "started_at", "finished_at")}
    return row.prompt_ids, row.response_ids, row.mask, row.logprobs, turns, extras, row.turn_scores, row.tool_rewards


# fault name -> (script replies, sample kwargs, expected reason, expected error or turn-level check)
FAULTS = {
    "malformed_json": (
        ['<tool_call>\n{"name": "echo", "arguments": {"text": "x"\n</tool_call>', "ok"],
        {},
        "final_answer",
    ),
    "unknown_tool": ([tool_call("nosuch", text="x"), "ok"], {}, "final_answer"),
    "tool_raises": ([tool_call("echo", text="boom"), "ok"], {}, "final_answer"),
    "tool_hangs": ([tool_call("echo", text="hang"), "ok"], {}, "final_answer"),
    "tool_10mb": ([tool_call("echo", text="huge"), "ok"], {}, "final_answer"),
    "interaction_raises": (["4"], {"interaction_kwargs": {"name": "raising"}}, "error"),
    "server_error": ([ServerFault("GPU fell off the bus")], {}, "error"),
    "empty_response": ([[]], {}, "error"),
    "overlong_prompt": (["never"], {}, "prompt_too_long"),
    "missing_interaction": (["x"], {"strict": True}, "error"),
}


@pytest.fixture(scope="module")
def loops() -> tuple[str, str]:
    return (
        register_loop(
            "lw_fault", tool_timeout_s=2.0, max_tool_response_tokens=64, max_parallel_calls=2, tool_parser="auto"
        ),
        register_loop("lw_fault_strict", require_interaction=True),
    )


async def test_each_fault_is_contained(worker, tokenizer, loops):
    loop, strict = loops
    tracked.reset()
    baseline = await run_batch(worker, CLEAN, clean_samples(loop))
    script, samples = dict(CLEAN), clean_samples(loop)
    for name, (replies, kwargs, _) in FAULTS.items():
        marker = f"fault-{name}" + (" pad" * 1100 if name == "overlong_prompt" else "")
        script[marker] = replies
        kwargs = dict(kwargs)
        samples.append(sample(marker, strict if kwargs.pop("strict", False) else loop, **kwargs))
    out = await run_batch(worker, script, samples)

    assert len(out) == len(samples)  # the batch completed, nothing dropped
    for i in range(2):
        assert comparable(Row(out, i)) == comparable(Row(baseline, i))
    rows = {name: Row(out, 2 + k) for k, name in enumerate(FAULTS)}
    assert {name: row.reason for name, row in rows.items()} == {name: f[2] for name, f in FAULTS.items()}

    def tool_text(name: str) -> str:
        return tokenizer.decode(rows[name].span(rows[name].extras["turns"][1])[0])

    assert tool_text("malformed_json").startswith("\n<|im_start|>user\n<tool_response>\nTool call 1 is not valid JSON")
    assert rows["malformed_json"].extras["num_malformed_tool_calls"] == 1
    assert "Unknown tool 'nosuch'. Available tools: echo, slow." in tool_text("unknown_tool")
    assert "Tool 'echo' failed: ValueError: boom requested" in tool_text("tool_raises")
    assert "Tool 'echo' timed out after 2 s and was cancelled." in tool_text("tool_hangs")
    big = rows["tool_10mb"].extras["turns"][1]
    assert big["span"][1] - big["span"][0] < 64 + 40 and tool_text("tool_10mb").count("y") < 10_000
    assert rows["interaction_raises"].extras["error"] == "RuntimeError: interaction exploded"
    assert rows["server_error"].extras["error"] == "RuntimeError: GPU fell off the bus"
    assert rows["empty_response"].extras["error"] == "RuntimeError: the server returned an empty response (0 tokens)"
    assert rows["overlong_prompt"].extras["error"].startswith("prompt has ")
    assert "requires interaction_kwargs.name" in rows["missing_interaction"].extras["error"]
    for name in ("interaction_raises", "server_error", "empty_response", "missing_interaction"):
        assert set(rows[name].mask) == {0}  # an error trajectory trains nothing
