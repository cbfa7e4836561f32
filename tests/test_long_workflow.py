"""LongWorkflowAgent through verl's real AgentLoopWorker, with a real Qwen tokenizer."""

from __future__ import annotations

import json

import pytest

from extensions.testing.scripted_server import ServerFault, fake_logprob
from tests.conftest import RESPONSE_LENGTH, Row, register_loop, run_batch, sample
from tests.fixtures import tools as tracked

IM_END = "<|im_end|>"
ASSISTANT_HEADER = "<|im_start|>assistant\n"


def tool_call(name: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def tool_span_text(*results: str) -> str:
    body = "".join(f"\n<tool_response>\n{r}\n</tool_response>" for r in results)
    return f"\n<|im_start|>user{body}{IM_END}\n{ASSISTANT_HEADER}"


def user_span_text(text: str) -> str:
    return f"\n<|im_start|>user\n{text}{IM_END}\n{ASSISTANT_HEADER}"


@pytest.fixture(autouse=True)
def _reset_tools():
    tracked.reset()


async def test_mixed_batch_each_loop_comes_back_right(worker, tokenizer):
    script = {
        "Q-long": [tool_call("echo", text="hi"), "Done: 4"],
        "Q-stock": [tool_call("echo", text="yo"), "Stock done"],
        "Q-single": ["Single answer"],
    }
    samples = [
        sample("Q-long", "long_workflow"),
        sample("Q-stock", "tool_agent"),
        sample("Q-single", "single_turn_agent"),
    ]
    out = await run_batch(worker, script, samples)
    long, stock, single = (Row(out, i) for i in range(3))

    assert long.reason == "final_answer"
    assert [t["role"] for t in long.extras["turns"]] == ["assistant", "tool", "assistant"]
    assert tokenizer.decode(long.response_ids) == (
        tool_call("echo", text="hi") + IM_END + tool_span_text("echo: hi") + "Done: 4" + IM_END
    )
    assert long.tool_rewards == [2.0]
    assert long.num_turns == 4  # 2 assistant + 1 tool round + 1
    # stock ToolAgentLoop: same tokens shape, no extras of ours
    assert tokenizer.decode(stock.response_ids) == (
        tool_call("echo", text="yo") + IM_END + tool_span_text("echo: yo") + "Stock done" + IM_END
    )
    assert stock.extras is None
    assert tokenizer.decode(single.response_ids) == "Single answer" + IM_END
    assert single.mask == [1] * len(single.response_ids)
    assert single.extras is None


async def test_fifteen_turn_trace_mask_span_by_span(worker, tokenizer):
    loop = register_loop("lw15", max_assistant_turns=15, max_tool_rounds=15, max_user_turns=15)
    replies, user_messages = [], [f"Feedback {k}: go on." for k in range(1, 8)]
    for turn in range(1, 16):
        if turn % 2:  # odd turns call a tool, except the last one which answers
            replies.append(
                f"<think>step {turn}</think>Final: {turn}"
                if turn == 15
                else f"<think>step {turn}</think>" + tool_call("echo", text=f"s{turn}")
            )
        else:
            replies.append(f"Answer after step {turn - 1}.")
    ikwargs = {"name": "scripted", "user_messages": user_messages}
    out = await run_batch(worker, {"Q15": replies}, [sample("Q15", loop, interaction_kwargs=ikwargs)])
    row = Row(out, 0)

    assert row.reason == "interaction_done"
    extras = row.extras
    assert (extras["num_assistant_turns"], extras["num_tool_rounds"], extras["num_user_turns"]) == (15, 7, 7)
    roles = [t["role"] for t in extras["turns"]]
    assert roles.count("assistant") == 15 and roles.count("tool") == 7 and roles.count("user") == 8
    # spans partition the response exactly
    appended = [t for t in extras["turns"] if t["span"][0] != t["span"][1]]
    assert appended[0]["span"][0] == 0 and appended[-1]["span"][1] == len(row.response_ids)
    assert all(a["span"][1] == b["span"][0] for a, b in zip(appended, appended[1:], strict=False))
    assistant_no, user_no = 0, 0
    for turn in extras["turns"]:
        ids, mask = row.span(turn)
        if turn["role"] == "assistant":
            assert tokenizer.decode(ids) == replies[assistant_no] + IM_END
            assert mask == [1] * len(ids)
            assert row.logprobs[turn["span"][0] : turn["span"][1]] == pytest.approx([fake_logprob(t) for t in ids])
            assistant_no += 1
        elif turn["role"] == "tool":
            assert tokenizer.decode(ids) == tool_span_text(f"echo: s{assistant_no}")
            assert mask == [0] * len(ids)
            assert turn["tool_calls"][0]["name"] == "echo" and turn["tool_calls"][0]["error"] is None
        elif turn["appended"]:
            assert tokenizer.decode(ids) == user_span_text(user_messages[user_no])
            assert mask == [0] * len(ids) and turn["score"] == 0.5
            user_no += 1
    assert row.turn_scores == [0.5] * 8
    assert extras["final_answer_text"] == "<think>step 15</think>Final: 15"
    # one tool instance for the whole trajectory
    assert [e[0] for e in tracked.LIFECYCLE if e[0] != "execute"] == ["create", "release"]
    assert len({e[2] for e in tracked.LIFECYCLE}) == 1


@pytest.mark.parametrize("in_loss", [True, False])
async def test_thinking_tokens_kept_and_masked_on_request(worker, tokenizer, in_loss):
    loop = register_loop(f"lw_think_{in_loss}", thinking_in_loss=in_loss)
    reply = "<think>Let me add 2 and 2.</think>The answer is 4."
    out = await run_batch(worker, {"Qthink": [reply]}, [sample("Qthink", loop)])
    row = Row(out, 0)
    assert tokenizer.decode(row.response_ids) == reply + IM_END  # stream unchanged either way
    think_ids = tokenizer.encode("<think>Let me add 2 and 2.</think>", add_special_tokens=False)
    n = len(think_ids)
    assert row.response_ids[:n] == think_ids
    assert row.mask == [int(in_loss)] * n + [1] * (len(row.response_ids) - n)


async def test_every_termination_reason(worker, tokenizer):
    loops = {
        "final": register_loop("lw_final"),
        "assist": register_loop("lw_assist", max_assistant_turns=2),
        "tools": register_loop("lw_tools", max_tool_rounds=1),
        "users": register_loop("lw_users", max_user_turns=1),
    }
    long_reply = [tokenizer.encode(" x", add_special_tokens=False)[0]] * (RESPONSE_LENGTH + 10)
    script = {
        "R-final": ["It is 4."],
        "R-done": ["It is 4.", "Still 4."],
        "R-assist": [tool_call("echo", text="a"), tool_call("echo", text="b")],
        "R-tools": [tool_call("echo", text="a"), tool_call("echo", text="b")],
        "R-users": ["4", "4 again"],
        "R-budget": [long_reply],
        "R-error": [ServerFault("server fell over")],
        "R-long" + " word" * (1100): ["never"],
    }
    samples = [
        sample("R-final", loops["final"]),
        sample("R-done", loops["final"], interaction_kwargs={"name": "scripted"}),
        sample("R-assist", loops["assist"]),
        sample("R-tools", loops["tools"]),
        sample("R-users", loops["users"], interaction_kwargs={"name": "scripted", "user_messages": ["a", "b"]}),
        sample("R-budget", loops["final"]),
        sample("R-error", loops["final"]),
        sample("R-long" + " word" * 1100, loops["final"]),
    ]
    out = await run_batch(worker, script, samples)
    rows = [Row(out, i) for i in range(len(samples))]
    assert [r.reason for r in rows] == [
        "final_answer",
        "interaction_done",
        "max_assistant_turns",
        "max_tool_rounds",
        "max_user_turns",
        "response_budget",
        "error",
        "prompt_too_long",
    ]
    # the max_* cases never ran the tool call they stopped on
    assert rows[2].extras["num_tool_calls"] == 1 and rows[3].extras["num_tool_calls"] == 1
    assert len(rows[5].response_ids) == RESPONSE_LENGTH and rows[5].mask == [1] * RESPONSE_LENGTH
    assert rows[6].extras["error"] == "RuntimeError: server fell over"
    assert rows[6].mask == [0] * len(rows[6].mask)
    assert rows[7].extras["error"].startswith("prompt has ") and rows[7].mask == [0]
    assert rows[4].turn_scores == [0.5, 0.5] and rows[4].extras["num_user_turns"] == 1
