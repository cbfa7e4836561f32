"""Folding when something other than a tool result has no room (verl's real AgentLoopWorker, the
scripted server, the real sandbox): a user's message that does not fit folds the context and opens
the next segment after the summary; a code block's output that does not fit cuts the turn and folds.
Without folds left, both end the trajectory with ``response_budget`` as in ``long_workflow``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from extensions.folding import INSTRUCTION, carry_message, parse_fold_settings
from extensions.folding_loop import FRAMING, template_tokens
from extensions.rollout.convert import to_record
from extensions.token_text import TRUNCATION_NOTE
from tests.conftest import FIXTURES, PROMPT_LENGTH, RESPONSE_LENGTH, ROOT, run_batch, sample, segment_worker
from tests.test_time_budget import scripted_clock
from tests.trainer_harness import tool_call

SUMMARY_CAP = 48
RESERVE_FINAL = 64
LEFT = 40
"""Response tokens left for generation after the long first reply: more than a turn needs
(``MIN_TURN_TOKENS``), less than ``reserve_final_tokens``, so no context message has room."""
SUMMARY = "<summary>Answered 5; the user asked me to check.</summary>"
BLOCK = "```python\nprint(6 * 7)\n```\n"


def entry(name: str, max_segments: int, **settings: Any) -> dict[str, Any]:
    fold = {"window_tokens": 100_000, "max_segments": max_segments, "summary_max_tokens": SUMMARY_CAP}
    return {
        "name": name,
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "reserve_final_tokens": RESERVE_FINAL,
        "fold": fold,
        **settings,
    }


def filler(tok: Any, tail: str, tokens: int) -> str:
    """Text of exactly ``tokens`` tokens that ends with ``tail``."""
    word = len(tok.encode(" alpha", add_special_tokens=False))
    head = "alpha" + " alpha" * ((tokens - len(tok.encode("alpha" + tail, add_special_tokens=False))) // word)
    text = head + tail
    assert len(tok.encode(text, add_special_tokens=False)) == tokens
    return text


def reserve(tok: Any) -> int:
    """The response tokens a fold keeps back while a fold is left (folding_loop.FoldingWorkflowAgent)."""
    return template_tokens(tok, parse_fold_settings(None, entry="x").instruction).instruction_tokens + FRAMING + 48


@pytest.fixture(scope="module")
def user_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    user = {"interaction_config_path": str(FIXTURES / "interactions.yaml"), "tool_parser": "hermes_strict"}
    carry = {"window_tokens": 2000, "trigger_fraction": 0.5, "observation_max_tokens": 2000}
    entries = [entry("fold_user", 3, **user), entry("fold_user_two", 2, **user)]
    entries.append({**entry("fold_carry", 2, tool_parser="hermes_strict"), "fold": carry})
    return segment_worker(qwen_dir, tmp_path_factory.mktemp("u"), entries)


@pytest.fixture(scope="module")
def fold_tool_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("t")
    tools = yaml.safe_load((FIXTURES / "tools.yaml").read_text())
    tools["tools"].append({"class_name": "extensions.tools.fold.FoldTool", "config": {"type": "native"}})
    (tmp / "tools.yaml").write_text(yaml.safe_dump(tools))
    settings = {"tool_parser": "hermes_strict", "interaction_config_path": None, "max_parallel_calls": 2}
    timed = {**settings, "max_trajectory_s": 10.0}
    entries = [entry("fold_tool", 2, **settings), entry("fold_tool_timed", 2, **timed)]
    entries.append(entry("fold_tool_timed_masked", 2, **timed, mask_time_budget=True))
    return segment_worker(qwen_dir, tmp, entries, tools=tmp / "tools.yaml")


@pytest.fixture(scope="module")
def fence_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    fence = {"tool_parser": "code_fence", "interaction_config_path": None}
    entries = [entry("fold_fence", 3, **fence), entry("fold_fence_two", 2, **fence)]
    tools = ROOT / "experiments" / "gsm8k_learn" / "tools.yaml"
    return segment_worker(qwen_dir, tmp_path_factory.mktemp("f"), entries, tools=tools, tool_format="auto")


async def test_a_user_message_without_room_folds_and_opens_the_next_segment(user_worker):
    tok = user_worker.tokenizer
    first = filler(tok, "\n#### 5", RESPONSE_LENGTH - reserve(tok) - LEFT - 1)  # + its end token
    script = {"FU": [first, SUMMARY, "Checked: 4.\n#### 4"]}
    ikwargs = {"name": "scripted", "user_messages": ["Please check again."]}
    out = await run_batch(user_worker, script, [sample("FU", "fold_user", interaction_kwargs=ikwargs)])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "budget"
    assert [t.role for t in segment.turns] == ["assistant", "user", "user", "assistant"]
    asked, fold = segment.turns[1], segment.turns[2]
    assert asked.span[0] == asked.span[1] and asked.visible_text == "Please check again."
    assert INSTRUCTION in fold.text
    content = carry_message("Answered 5; the user asked me to check.", None)["content"]
    assert tok.decode(record.prompt_ids).endswith(
        f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>user\nPlease check again.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    extras = out.non_tensor_batch["extras"][0]
    assert extras["termination_reason"] == "interaction_done" and extras["num_user_turns"] == 1
    raw = record.model_dump()["segments"][0]["turns"][1]
    assert raw["span"] == (asked.span[0], asked.span[0])


async def test_in_the_last_segment_a_user_message_without_room_ends_the_trajectory(user_worker):
    tok = user_worker.tokenizer
    first = filler(tok, "\n#### 5", RESPONSE_LENGTH - reserve(tok) - LEFT - 1)
    last = filler(tok, "\n#### 4", RESPONSE_LENGTH - LEFT - 1)  # no fold left: no reserve
    ikwargs = {"name": "scripted", "user_messages": ["Please check again.", "And again."]}
    script = {"FU2": [first, SUMMARY, last]}
    out = await run_batch(user_worker, script, [sample("FU2", "fold_user_two", interaction_kwargs=ikwargs)])
    record = to_record(out, 0, tok)
    assert len(record.segments) == 1
    extras = out.non_tensor_batch["extras"][0]
    assert (extras["termination_reason"], extras["error"]) == ("response_budget", "no room left for the user's message")
    assert [t["role"] for t in extras["turns"]] == ["assistant", "user"] and extras["turns"][1]["appended"] is False
    assert extras["turns"][1]["text"] == "And again." and extras["num_user_turns"] == 1


async def test_a_code_output_without_room_cuts_the_turn_and_folds(fence_worker):
    tok = fence_worker.tokenizer
    first = filler(tok, "\n" + BLOCK, RESPONSE_LENGTH - reserve(tok) - LEFT)
    summary = "<summary>I was computing 6 * 7.</summary>"
    again = "Again:\n" + BLOCK
    script = {"FF": [first, summary, again, "6 * 7 = 42.\n#### 42"]}
    out = await run_batch(fence_worker, script, [sample("FF", "fold_fence")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "budget"
    assert [t.role for t in segment.turns] == ["assistant", "user", "assistant"]
    cut = segment.turns[0]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    # the cut turn: the policy's tokens (trained), then the closing the fold request needs (not trained)
    closing = [end, *tok.encode("\n", add_special_tokens=False)]
    assert segment.response_ids[: cut.span[1]] == tok.encode(first, add_special_tokens=False)
    assert segment.response_ids[cut.span[1] : cut.span[1] + 2] == closing
    assert segment.response_mask[: cut.span[1] + 2] == [1] * cut.span[1] + [0, 0]
    assert cut.code_calls == []  # the block was not given an output
    assert "```output" not in tok.decode(segment.response_ids)
    assert record.termination_reason == "final_answer"
    # the next segment runs the block again (its output was never shown) and sees its output this time
    assert tok.decode(record.response_ids) == again + "```output\n42\n```\n" + "6 * 7 = 42.\n#### 42<|im_end|>"
    (call,) = record.turns[0].code_calls
    assert (call.result, call.succeeded) == ("42", True)


async def test_in_the_last_segment_a_code_output_without_room_ends_the_trajectory(fence_worker):
    tok = fence_worker.tokenizer
    first = filler(tok, "\n" + BLOCK, RESPONSE_LENGTH - reserve(tok) - LEFT)
    last = filler(tok, "\n" + BLOCK.replace("6 * 7", "6 * 8"), RESPONSE_LENGTH - LEFT)  # no fold left: no reserve
    script = {"FF2": [first, "<summary>6 * 7</summary>", last, "never asked for"]}
    out = await run_batch(fence_worker, script, [sample("FF2", "fold_fence_two")])
    assert len(to_record(out, 0, tok).segments) == 1
    extras = out.non_tensor_batch["extras"][0]
    assert (extras["termination_reason"], extras["error"]) == (
        "response_budget",
        "no room left for a code block's output",
    )
    assert extras["num_assistant_turns"] == 2 and [t["role"] for t in extras["turns"]] == ["assistant"]


async def test_a_carried_observation_is_cut_until_the_next_prompt_fits(user_worker):
    """observation_max_tokens (2000) is more than the prompt can hold (1024): the last tool result is cut
    further, by the overflow, instead of the fold failing with prompt_too_long."""
    tok = user_worker.tokenizer
    long = " ".join(["alpha"] * 1200)
    script = {"FC": [tool_call("echo", text=long), "<summary>Echoed it.</summary>", "#### 4"]}
    out = await run_batch(user_worker, script, [sample("FC", "fold_carry")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "context" and record.termination_reason == "final_answer"
    assert PROMPT_LENGTH - 2 * 16 <= len(record.prompt_ids) <= PROMPT_LENGTH
    prompt = tok.decode(record.prompt_ids)
    assert "The last message before the summary:\necho: alpha alpha" in prompt
    assert TRUNCATION_NOTE.strip() in prompt


async def test_a_call_to_fold_folds_and_in_the_last_segment_is_answered_with_an_error(fold_tool_worker):
    tok = fold_tool_worker.tokenizer
    both = tool_call("echo", text="not run") + "\n" + tool_call("fold")
    script = {"FT": [both, "<summary>Nothing yet.</summary>", tool_call("fold"), "#### 4"]}
    out = await run_batch(fold_tool_worker, script, [sample("FT", "fold_tool")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "tool"
    assert [t.role for t in segment.turns] == ["assistant", "user", "assistant"]  # no tool round: nothing ran
    assert segment.turns[0].text.startswith(both)
    assert [t.role for t in record.turns] == ["assistant", "tool", "assistant"]
    assert "error: no fold is left (this is segment 2 of max_segments 2); finish the task in this context" in (
        record.turns[1].text
    )
    extras = out.non_tensor_batch["extras"][0]
    assert extras["termination_reason"] == "final_answer" and extras["num_tool_calls"] == 0
    assert '"name": "fold"' in tok.decode(segment.prompt_ids)  # the tool is offered in the prompt


async def test_a_fold_past_the_time_writes_no_summary(fold_tool_worker, monkeypatch):
    """A fold's summary is a generation: past max_trajectory_s the trajectory ends before it (time_budget)."""
    read = scripted_clock(monkeypatch, [0.0, 10.5])  # the first reply starts in time; the fold would not
    script = {"FT-late": [tool_call("fold"), "<summary>Never asked for.</summary>", "#### 4"]}
    out = await run_batch(fold_tool_worker, script, [sample("FT-late", "fold_tool_timed")])
    assert read == [0.0, 10.5]
    extras = out.non_tensor_batch["extras"][0]
    assert extras["termination_reason"] == "time_budget"
    assert re.fullmatch(r"the trajectory ran 10\.\d s; max_trajectory_s is 10", extras["error"])
    assert [t["role"] for t in extras["turns"]] == ["assistant"]
    assert "Never asked for" not in fold_tool_worker.tokenizer.decode(out.batch["responses"][0])


async def test_with_mask_time_budget_every_segment_of_a_stopped_trajectory_has_mask_0(fold_tool_worker, monkeypatch):
    """The first segment folded in time; the second reply would start past the bound: both segments keep their
    tokens, with mask 0 (without the setting, the first segment's reply and summary have mask 1)."""
    tok = fold_tool_worker.tokenizer
    script = ["Step one. " + tool_call("fold"), "<summary>Step one done.</summary>", "Never asked for. #### 4"]
    records = []
    for name in ("fold_tool_timed", "fold_tool_timed_masked"):
        scripted_clock(monkeypatch, [0.0, 0.0, 10.5])  # the reply and the fold's summary in time, the next one late
        out = await run_batch(fold_tool_worker, {f"FT-{name}": list(script)}, [sample(f"FT-{name}", name)])
        records.append(to_record(out, 0, tok))
    plain, masked = records
    for record in records:
        (segment,) = record.segments
        assert (segment.fold_trigger, record.termination_reason) == ("tool", "time_budget")
    assert plain.segments[0].response_ids == masked.segments[0].response_ids
    assert plain.response_ids == masked.response_ids
    assert sum(plain.segments[0].response_mask) > 0
    assert masked.segments[0].response_mask == [0] * len(masked.segments[0].response_ids)
    assert masked.response_mask == [0] * len(masked.response_ids)


async def test_a_fold_call_from_a_sample_not_offered_the_tool_is_an_unknown_tool(fold_tool_worker):
    tok = fold_tool_worker.tokenizer
    script = {"FT0": [tool_call("fold"), "#### 4"]}
    out = await run_batch(
        fold_tool_worker, script, [sample("FT0", "fold_tool", extra_info={"tool_selection": ["echo"]})]
    )
    record = to_record(out, 0, tok)
    assert record.segments == [] and [t.role for t in record.turns] == ["assistant", "tool", "assistant"]
    assert "fold" in record.turns[1].text and "echo" in record.turns[1].text  # the error names the offered tools
    assert '"name": "fold"' not in tok.decode(record.prompt_ids)


@pytest.fixture
def sandbox_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The code of every block the loop hands to the sandbox (``code_fence_loop.run_block``'s tool call)."""
    from extensions import tool_session

    calls: list[str] = []
    original = tool_session.ToolSession.call

    async def spy(self, name, arguments, *args, **kwargs):
        calls.append(json.loads(arguments)["code"])
        return await original(self, name, arguments, *args, **kwargs)

    monkeypatch.setattr(tool_session.ToolSession, "call", spy)
    return calls


LONG_BLOCK = '```python\nprint("alpha " * 120)\n```\n'
"""Its output (about 120 tokens, under the 256-token cap) has no room where an empty output block does."""


async def test_code_whose_output_did_not_fit_is_not_recorded_as_run(fence_worker, sandbox_calls, monkeypatch):
    """The block ran but its output had no room, so the model never saw it: ``code_fence_loop.run_inline`` returns
    None and takes the code back out of ``code_run`` (its contract: "not recorded as run, and may run again"). The
    spy reads ``code_run`` as ``run_inline`` returns, since the fold that follows forgets every run code anyway.
    The next segment runs it again and sees its output."""
    from extensions import code_fence_loop

    after_inline: list[tuple[bool, bool]] = []
    run_inline = code_fence_loop.run_inline

    async def spy(loop, episode, block, text):
        inserted = await run_inline(loop, episode, block, text)
        after_inline.append((inserted is None, block.code.strip() in episode.code_run))
        return inserted

    monkeypatch.setattr(code_fence_loop, "run_inline", spy)
    tok = fence_worker.tokenizer
    room = 40  # tokens for context messages: an empty output block fits, the printed text does not
    first = filler(tok, "\n" + LONG_BLOCK, RESPONSE_LENGTH - reserve(tok) - RESERVE_FINAL - room)
    script = {"FL": [first, "<summary>I printed alpha.</summary>", "Again:\n" + LONG_BLOCK, "Done.\n#### 1"]}
    out = await run_batch(fence_worker, script, [sample("FL", "fold_fence")])
    assert after_inline == [(True, False), (False, True)]  # no room: ran, not recorded; after the fold: recorded
    assert sandbox_calls == ['print("alpha " * 120)', 'print("alpha " * 120)']  # ran, then ran again after the fold
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "budget" and segment.turns[0].code_calls == []  # no output block was added
    assert "```output" not in tok.decode(segment.response_ids)
    (call,) = record.turns[0].code_calls
    assert call.succeeded and record.termination_reason == "final_answer"


async def test_a_turns_span_is_cut_before_a_fold(user_worker):
    """Tool results end with the next assistant turn's opening; a fold request must follow an ended turn, so the
    opening is taken back (``_end_turn_for_request``) and the tool turn's recorded span shrinks with it."""
    tok = user_worker.tokenizer
    long = " ".join(["alpha"] * 1200)
    script = {"FS": [tool_call("echo", text=long), "<summary>Echoed it.</summary>", "#### 4"]}
    out = await run_batch(user_worker, script, [sample("FS", "fold_carry")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "context"
    assert [t.role for t in segment.turns] == ["assistant", "tool", "user", "assistant"]
    tool, fold = segment.turns[1], segment.turns[2]
    assert tool.span[1] == fold.span[0]  # the cut span ends where the fold's instruction starts
    tool_text = tok.decode(segment.response_ids[tool.span[0] : tool.span[1]])
    assert tool_text.endswith("</tool_response><|im_end|>\n")  # no "<|im_start|>assistant\n" left on it
    assert tok.decode(segment.response_ids[fold.span[0] : fold.span[1]]).startswith("<|im_start|>user\n")


async def test_a_folded_trajectory_that_ends_in_error_trains_on_none_of_its_segments(user_worker):
    """The server fails in the second segment: the trajectory ends in ``error`` and every segment's mask is 0."""
    from extensions.testing.scripted_server import ServerFault

    tok = user_worker.tokenizer
    long = " ".join(["alpha"] * 1200)
    script = {"FE": [tool_call("echo", text=long), "<summary>Echoed it.</summary>", ServerFault("engine died")]}
    out = await run_batch(user_worker, script, [sample("FE", "fold_carry")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert (segment.fold_trigger, record.termination_reason) == ("context", "error")
    assert "engine died" in out.non_tensor_batch["extras"][0]["error"]
    # the first segment's policy tokens (its tool call, its summary) are there, and none of them trains
    assert len(segment.response_ids) > 100 and segment.response_mask == [0] * len(segment.response_ids)
    assert record.response_mask == [0] * len(record.response_ids)
