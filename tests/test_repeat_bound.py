"""``code_fence.end_after_repeats``: a trajectory that keeps rewriting code that already ran ends (``repeat_loop``),
through verl's real AgentLoopWorker, the real sandbox and a scripted server."""

from __future__ import annotations

from typing import Any

import pytest

from extensions.code_fence import output_block
from extensions.custom_rewards import compute_score
from extensions.errors import ConfigError
from extensions.loop_settings import parse_settings
from tests.conftest import ROOT, Row, build_worker, register_loop, run_batch, sample

TOOLS = ROOT / "experiments" / "gsm8k_learn" / "tools.yaml"
LOOPS = ROOT / "experiments" / "gsm8k_learn" / "agent_loops.yaml"
BLOCK = "```python\nprint(6 * 7)\n```\n"
NO_USER = {"interaction_config_path": None}
REPEATED = "Not run: this exact code already ran above; its output will not change."


@pytest.fixture(scope="module")
def fence_worker(qwen_dir: Any) -> Any:
    return build_worker(qwen_dir, tools=TOOLS, agent_loops=LOOPS, tool_format="auto")


def enc(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


async def test_the_second_repeat_ends_the_trajectory_after_its_refusal(fence_worker):
    tok = fence_worker.tokenizer
    loop = register_loop("rb_two", tool_parser="code_fence", code_fence={"end_after_repeats": 2}, **NO_USER)
    replies = [BLOCK, "Hmm.\n" + BLOCK, "Again.\n" + BLOCK, "#### 42"]
    row = Row(await run_batch(fence_worker, {"RB-two": replies}, [sample("RB-two", loop)]), 0)
    ran, refused = output_block("42", after=BLOCK), output_block(REPEATED, after=BLOCK)
    pieces = [(BLOCK, 1), (ran, 0), ("Hmm.\n" + BLOCK, 1), (refused, 0), ("Again.\n" + BLOCK, 1), (refused, 0)]
    assert row.response_ids == [t for text, _ in pieces for t in enc(tok, text)]  # "#### 42" is never asked for
    assert row.mask == [m for text, m in pieces for _ in enc(tok, text)]
    assert len(fence_worker.llm_client.calls) == 3
    extras = row.extras
    assert extras["termination_reason"] == "repeat_loop"
    assert extras["error"] == "2 blocks repeated code that already ran; end_after_repeats is 2"
    assert (extras["num_repeated_blocks"], extras["num_executed_calls"], extras["num_tool_calls"]) == (2, 1, 3)
    calls = extras["turns"][0]["code_calls"]
    assert [(c["error"], c["executed"]) for c in calls] == [(None, True), ("repeated", False), ("repeated", False)]


async def test_a_repeat_that_ends_the_turn_ends_the_trajectory_without_a_tool_round(fence_worker):
    loop = register_loop("rb_trailing", tool_parser="code_fence", code_fence={"end_after_repeats": 1}, **NO_USER)
    replies = [BLOCK, "Check:\n" + BLOCK.rstrip("\n"), "#### 42"]  # the second block closes the turn
    row = Row(await run_batch(fence_worker, {"RB-trail": replies}, [sample("RB-trail", loop)]), 0)
    extras = row.extras
    assert [t["role"] for t in extras["turns"]] == ["assistant"]
    assert (extras["termination_reason"], extras["num_repeated_blocks"]) == ("repeat_loop", 1)
    assert extras["error"] == "1 blocks repeated code that already ran; end_after_repeats is 1"


async def test_without_the_bound_repeats_are_counted_and_the_trajectory_goes_on(fence_worker):
    loop = register_loop("rb_none", tool_parser="code_fence", code_fence=None, **NO_USER)
    replies = [BLOCK, "Hmm.\n" + BLOCK, "Again.\n" + BLOCK, "So:\n#### 42"]
    row = Row(await run_batch(fence_worker, {"RB-none": replies}, [sample("RB-none", loop)]), 0)
    assert (row.reason, row.extras["num_repeated_blocks"], row.extras["num_executed_calls"]) == ("final_answer", 2, 1)


def test_a_loop_cut_short_has_no_answer_and_costs_the_budget_penalty():
    """What a run out of budget earns, so a model never learns that looping until the bound pays better."""
    kwargs = {"mode": "flexible", "budget_penalty": 0.5}
    extras = {"termination_reason": "repeat_loop", "final_answer_text": "#### 72", "num_repeated_blocks": 2}
    scored = compute_score("longflow/gsm8k", "", "72", {"extras": extras}, **kwargs)
    assert (scored["score"], scored["answer_found"], scored["termination_penalty"]) == (-0.5, 0.0, 0.5)
    assert (scored["term_repeat_loop"], scored["num_repeated_blocks"]) == (1.0, 2.0)
    ran_out = compute_score("longflow/gsm8k", "", "72", {"extras": {**extras, "termination_reason": "response_budget"}})
    assert ran_out["score"] == 0.0 and compute_score("longflow/gsm8k", "", "72", {"extras": extras})["score"] == 0.0


def test_the_bound_must_be_at_least_one():
    with pytest.raises(ConfigError) as error:
        parse_settings({"code_fence": {"end_after_repeats": 0}}, entry="rb_bad")
    assert str(error.value) == (
        "agent loop 'rb_bad': key 'code_fence.end_after_repeats': Input should be greater than or equal to 1 (got 0)"
    )


async def test_a_repeat_past_a_cap_is_still_a_repeat(fence_worker):
    """Caps are checked after repeats: a loop that reached max_calls_per_turn is counted and ended all the same."""
    settings = {"end_after_repeats": 1, "max_calls_per_turn": 1}
    loop = register_loop("rb_cap", tool_parser="code_fence", code_fence=settings, **NO_USER)
    row = Row(await run_batch(fence_worker, {"RB-cap": [BLOCK, BLOCK, "#### 42"]}, [sample("RB-cap", loop)]), 0)
    calls = row.extras["turns"][0]["code_calls"]
    assert [(c["error"], c["result"]) for c in calls] == [(None, "42"), ("repeated", REPEATED)]
    assert (row.reason, row.extras["num_repeated_blocks"]) == ("repeat_loop", 1)


async def test_code_whose_call_timed_out_may_run_again(fence_worker):
    """A call that timed out showed no output of the code: the same block again is a retry, not a repeat."""
    slow = "```python\nimport time\ntime.sleep(3)\nprint(1)\n```\n"
    loop = register_loop(
        "rb_retry", tool_parser="code_fence", code_fence={"end_after_repeats": 1}, tool_timeout_s=0.5, **NO_USER
    )
    row = Row(await run_batch(fence_worker, {"RB-retry": [slow, slow, "#### 1"]}, [sample("RB-retry", loop)]), 0)
    calls = row.extras["turns"][0]["code_calls"]
    timed_out = "Tool 'python_exec' timed out after 0.5 s and was cancelled."
    assert [(c["error"], c["result"]) for c in calls] == [("timeout", timed_out), ("timeout", timed_out)]
    assert (row.reason, row.extras["num_repeated_blocks"]) == ("final_answer", 0)
