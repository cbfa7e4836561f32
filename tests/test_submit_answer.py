"""submit_answer (extensions/tools/submit.py): a valid call ends the trajectory with its answer, in the ReAct loop
and in the folding loop, on verl's real AgentLoopWorker with tool_configs/ledger.yaml and the scripted server."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from extensions.custom_rewards import compute_score
from extensions.data.ledger import LEDGER
from extensions.rollout.convert import to_record
from extensions.tools.submit import SubmitAnswerTool, answer_line, submitted_answer
from tests.conftest import ROOT, Row, run_batch, sample, segment_worker
from tests.test_long_workflow import IM_END, tool_call, tool_span_text

PAGES = ["Ledger page 1 of 2\nT00001 | deposit | 214 | rent ref 111111", "Ledger page 2 of 2\nT00002 | deposit | 9"]
OFFERED = ["read_page", "submit_answer"]


def ledger_sample(marker: str, loop: str, tools: list[str]) -> dict[str, Any]:
    return sample(
        marker,
        loop,
        tools_kwargs={"read_page": {"create_kwargs": {"pages": PAGES}}},
        extra_info={"tool_selection": tools},
    )


@pytest.fixture(scope="module")
def submit_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    entries = [
        {"name": "sub_react", "_target_": "extensions.custom_rollouts.LongWorkflowAgent", "tool_parser": "hermes"},
        {
            "name": "sub_one_turn",
            "_target_": "extensions.custom_rollouts.LongWorkflowAgent",
            "tool_parser": "hermes",
            "max_assistant_turns": 1,
        },
        {  # the pack's parser, which answers a malformed call (verl's hermes drops it: the text reads as a reply)
            "name": "sub_one_turn_auto",
            "_target_": "extensions.custom_rollouts.LongWorkflowAgent",
            "tool_parser": "auto",
            "max_assistant_turns": 1,
        },
        {"name": "sub_react_auto", "_target_": "extensions.custom_rollouts.LongWorkflowAgent", "tool_parser": "auto"},
        {
            "name": "sub_fold",
            "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
            "tool_parser": "hermes",
            "fold": {"window_tokens": 640, "trigger_fraction": 0.6, "carry_last_observation": False},
        },
    ]
    return segment_worker(qwen_dir, tmp_path_factory.mktemp("loops"), entries, tools=ROOT / "tool_configs/ledger.yaml")


async def test_a_submit_call_ends_the_trajectory_and_is_the_answer_the_reward_reads(submit_worker):
    tok = submit_worker.tokenizer
    script = {"S-ok": [tool_call("read_page", page=1), tool_call("submit_answer", answer=214)]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-ok", "sub_react", OFFERED)]), 0)
    assert row.reason == "final_answer" and row.extras["error"] is None
    assert row.extras["final_answer_text"] == "#### 214"
    # the call is the last thing in the response: no tool result follows it, and its tokens are trained
    want = tool_call("read_page", page=1) + IM_END + tool_span_text(PAGES[0]) + tool_call("submit_answer", answer=214)
    assert tok.decode(row.response_ids) == want + IM_END
    last = row.extras["turns"][-1]
    assert last["role"] == "assistant" and set(row.span(last)[1]) == {1}
    assert row.extras["num_tool_calls"] == 1 and row.extras["num_tool_rounds"] == 1  # read_page only: submit never ran
    score = compute_score(LEDGER, tok.decode(row.response_ids), "214", {"extras": row.extras}, mode="strict")
    assert score["acc"] == 1.0 and score["score"] == 1.0


async def test_a_submit_call_after_another_call_in_one_turn_still_ends_it(submit_worker):
    # verl's max_parallel_calls is 1: the model's "read on and answer" turn keeps read_page and drops the rest,
    # but the answer counts and the read does not run
    turn = tool_call("read_page", page=2) + tool_call("submit_answer", answer=214)
    row = Row(await run_batch(submit_worker, {"S-two": [turn]}, [ledger_sample("S-two", "sub_react", OFFERED)]), 0)
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "#### 214"
    assert row.extras["num_tool_calls"] == 0 and [t["role"] for t in row.extras["turns"]] == ["assistant"]


async def test_a_submit_call_on_the_last_allowed_turn_is_the_answer_not_the_limit(submit_worker):
    script = {"S-last": [tool_call("submit_answer", answer=214)]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-last", "sub_one_turn", OFFERED)]), 0)
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "#### 214"
    script = {"S-limit": [tool_call("read_page", page=1)]}  # any other call on that turn still meets the limit
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-limit", "sub_one_turn", OFFERED)]), 0)
    assert row.reason == "max_assistant_turns"


@pytest.mark.parametrize("call", ["closed", "unclosed"])
async def test_a_last_turn_that_asks_for_a_tool_is_no_answer(submit_worker, call):
    # the weak warm start's greedy loop (docs/results/ledger-fold-weak-start-h100): `{"page": 214}` is a request,
    # and flexible extraction once read its number as the answer to a ledger whose answer was 214
    text = tool_call("read_page", page=214)
    text = text if call == "closed" else text.removesuffix("</tool_call>")
    script = {f"S-{call}": [text]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample(f"S-{call}", "sub_one_turn_auto", OFFERED)]), 0)
    assert row.reason == "max_assistant_turns" and row.extras["final_answer_text"] == ""
    assert row.extras["num_malformed_tool_calls"] == (call == "unclosed")
    tok = submit_worker.tokenizer
    score = compute_score(LEDGER, tok.decode(row.response_ids), "214", {"extras": row.extras}, mode="flexible")
    assert (score["acc"], score["answer_found"]) == (0.0, 0.0)
    script = {f"S-{call}-answer": [text, "It is 214."]}  # the same request, then a plain reply: that is the answer
    row = Row(await run_batch(submit_worker, script, [ledger_sample(f"S-{call}-answer", "sub_react_auto", OFFERED)]), 0)
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "It is 214."


async def test_a_tool_release_problem_after_a_plain_reply_keeps_the_answer(submit_worker, monkeypatch):
    # close_episode adds release problems to parse_errors after the last turn: that turn still answered
    from extensions.tool_session import ToolSession

    async def close(self):
        return ["read_page: release failed: connection reset"]

    monkeypatch.setattr(ToolSession, "close", close)
    script = {"S-release": [tool_call("read_page", page=1), "It is 214."]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-release", "sub_react_auto", OFFERED)]), 0)
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "It is 214."


async def test_an_empty_answer_is_refused_and_the_trajectory_goes_on(submit_worker):
    tok = submit_worker.tokenizer
    script = {"S-empty": [tool_call("submit_answer", answer="  "), tool_call("submit_answer", answer=9)]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-empty", "sub_react", OFFERED)]), 0)
    assert tok.decode(row.span(row.extras["turns"][1])[0]) == tool_span_text(
        "error: answer must be one line with the number, got an empty or multi-line string"
    )
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "#### 9"


async def test_bad_arguments_are_answered_and_the_trajectory_goes_on(submit_worker):
    tok = submit_worker.tokenizer
    script = {"S-bad": [tool_call("submit_answer", amount=9), tool_call("submit_answer", answer="9")]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-bad", "sub_react", OFFERED)]), 0)
    tool_turn = row.extras["turns"][1]
    assert tool_turn["tool_calls"][0]["error"] == "bad_arguments"
    assert tok.decode(row.span(tool_turn)[0]) == tool_span_text(
        "Missing required argument(s) for 'submit_answer': answer. Expected: ['answer']."  # the ToolSession's check
    )
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "#### 9"


async def test_a_sample_not_offered_submit_answer_gets_the_unknown_tool_error(submit_worker):
    tok = submit_worker.tokenizer
    script = {"S-off": [tool_call("submit_answer", answer=214), "It is 214.\n#### 214"]}
    row = Row(await run_batch(submit_worker, script, [ledger_sample("S-off", "sub_react", ["read_page"])]), 0)
    tool_turn = row.extras["turns"][1]
    assert tok.decode(row.span(tool_turn)[0]) == tool_span_text(
        "Unknown tool 'submit_answer'. Available tools: read_page."
    )
    assert row.reason == "final_answer" and row.extras["final_answer_text"] == "It is 214.\n#### 214"


async def test_the_folding_loop_ends_on_a_submit_call_in_a_later_segment(submit_worker):
    long_page = PAGES[0] + "\n" + " ".join(["memo"] * 200)
    summary = "<summary>Read page 1: ref 111111 has amount 214.</summary>"
    script = {"S-fold": [tool_call("read_page", page=1), summary, tool_call("submit_answer", answer=214)]}
    item = ledger_sample("S-fold", "sub_fold", OFFERED)
    item["tools_kwargs"]["read_page"]["create_kwargs"]["pages"] = [long_page, PAGES[1]]
    out = await run_batch(submit_worker, script, [item])
    record = to_record(out, 0, submit_worker.tokenizer)
    (segment,) = record.segments  # one fold: the summary ends segment 0, the call ends segment 1 and the task
    assert segment.fold_trigger == "context" and [t.role for t in record.turns] == ["assistant"]
    assert record.termination_reason == "final_answer" and Row(out, 0).extras["final_answer_text"] == "#### 214"
    assert submit_worker.tokenizer.decode(record.response_ids) == tool_call("submit_answer", answer=214) + IM_END


@pytest.mark.parametrize("turn", ["fold_first", "submit_first"])
async def test_submit_wins_over_fold_in_either_order(submit_worker, turn):
    calls = [tool_call("fold"), tool_call("submit_answer", answer=214)]
    text = "".join(calls if turn == "fold_first" else calls[::-1])
    item = ledger_sample(f"S-{turn}", "sub_fold", [*OFFERED, "fold"])
    out = await run_batch(submit_worker, {f"S-{turn}": [text]}, [item])
    record = to_record(out, 0, submit_worker.tokenizer)
    assert record.segments == [] and record.termination_reason == "final_answer"
    assert Row(out, 0).extras["final_answer_text"] == "#### 214"


def test_the_answer_line_and_which_call_counts():
    schema = SubmitAnswerTool({"type": "native"}).tool_schema
    call = lambda name, arguments: SimpleNamespace(name=name, arguments=arguments)  # noqa: E731
    assert [answer_line(214.0), answer_line(2.5), answer_line(-3)] == ["#### 214", "#### 2.5", "#### -3"]
    assert answer_line(" 5675 ") == "#### 5675"  # a quoted number, as the 0.5B model writes it (CPU run 10)
    calls = [
        call("read_page", json.dumps({"page": 2})),
        call("submit_answer", "{not json"),
        call("submit_answer", json.dumps({"answer": [7]})),
        call("submit_answer", json.dumps({"answer": 7})),
        call("submit_answer", json.dumps({"answer": 8})),
    ]
    assert submitted_answer(schema, calls) == "#### 7"  # the first valid call
    assert submitted_answer(schema, calls[:3]) is None


async def test_a_loop_that_does_not_end_on_it_gets_the_answer_line_back():
    tool = SubmitAnswerTool({"type": "native"})
    response, reward, metrics = await tool.execute("i", {"answer": 214})
    assert (response.text, reward, metrics) == ("#### 214", 0.0, {})
    response, _, metrics = await tool.execute("i", {})
    assert (
        response.text
        == "error: missing required argument 'answer'. submit_answer takes answer (number or string, required)."
    )
    assert metrics == {"error": "bad_arguments"}
