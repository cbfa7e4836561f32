"""Code-fence tool calls through verl's real AgentLoopWorker, the real sandbox and a scripted server.

The scripted server honours ``stop`` strings as vLLM does, so a scripted reply that runs on past
a closing fence (say, into an invented ```output block) is cut there, as the real engine would
have paused: what follows in the stream is the sandbox's real output (mask 0).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extensions.code_fence import output_block
from extensions.metrics import time_split
from tests.conftest import ROOT, Row, build_worker, register_loop, run_batch, sample

TOOLS = ROOT / "experiments" / "gsm8k_learn" / "tools.yaml"
LOOPS = ROOT / "experiments" / "gsm8k_learn" / "agent_loops.yaml"


@pytest.fixture(scope="module")
def fence_worker(qwen_dir: Any) -> Any:
    return build_worker(qwen_dir, tools=TOOLS, agent_loops=LOOPS, tool_format="auto")


def fence_loop(name: str, **code_fence: Any) -> str:
    return register_loop(name, tool_parser="code_fence", code_fence=code_fence or None, interaction_config_path=None)


def enc(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


async def test_two_blocks_run_inside_one_turn_with_exact_tokens_and_masks(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_two")
    first = "Tickets cost 6 each; 7 people.\n```python\nprint(6 * 7)\n```\n"
    second = "Add the 1 fee:\n```python\nprint(42 + 1)\n```\n"
    last = "So the total is 43.\n#### 43"
    script = {"CF-two": [first, second, last]}
    out = await run_batch(fence_worker, script, [sample("CF-two", loop)])
    row = Row(out, 0)
    out1, out2 = output_block("42", after=first), output_block("43", after=second)
    assert out1 == "```output\n42\n```\n"
    pieces = [(enc(tok, first), 1), (enc(tok, out1), 0), (enc(tok, second), 1), (enc(tok, out2), 0)]
    pieces.append((enc(tok, last) + [tok.eos_token_id], 1))
    assert row.response_ids == [t for ids, _ in pieces for t in ids]
    assert row.mask == [m for ids, m in pieces for _ in ids]
    assert [lp == 0.0 for lp in row.logprobs] == [m == 0 for m in row.mask]  # outputs carry no log-prob
    extras = row.extras
    assert extras["termination_reason"] == "final_answer"
    assert extras["num_assistant_turns"] == 1 and extras["num_tool_rounds"] == 0
    assert (extras["num_tool_calls"], extras["num_executed_calls"], extras["num_successful_calls"]) == (2, 2, 2)
    assert extras["num_invented_outputs"] == 0
    (turn,) = extras["turns"]
    assert turn["span"] == [0, len(row.response_ids)]
    calls = turn["code_calls"]
    assert [(c["arguments"], c["result"], c["succeeded"]) for c in calls] == [
        ('{"code": "print(6 * 7)"}', "42", True),
        ('{"code": "print(42 + 1)"}', "43", True),
    ]
    lo, hi = calls[0]["span"]
    assert tok.decode(row.response_ids[lo:hi]) == out1 and set(row.mask[lo:hi]) == {0}
    assert extras["final_answer_text"].endswith("#### 43")
    split = time_split(extras["turns"])  # the blocks' run time is tool time, their outputs no generated tokens
    assert split["tool_s"] == pytest.approx(calls[0]["latency_s"] + calls[1]["latency_s"]) and split["tool_s"] > 0
    assert split["generate_s"] == pytest.approx(turn["latency_s"] - split["tool_s"])
    assert split["generated_tokens"] == sum(row.mask) and split["assistant_turns"] == 1


async def test_an_invented_output_block_is_never_taken_for_a_result(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_invented")
    # the model would go on to invent "5": the engine pauses at the closing fence, the sandbox says 4
    first = "```python\nprint(2 + 2)\n```\n```output\n5\n```\n#### 5"
    second = "Without running anything:\n```output\n9\n```\n"
    last = "#### 4"
    out = await run_batch(fence_worker, {"CF-inv": [first, second, last]}, [sample("CF-inv", loop)])
    row = Row(out, 0)
    kept = "```python\nprint(2 + 2)\n```\n"
    expected = enc(tok, kept) + enc(tok, "```output\n4\n```\n") + enc(tok, second) + enc(tok, last) + [tok.eos_token_id]
    assert row.response_ids == expected
    assert row.extras["num_invented_outputs"] == 1  # the model's own ```output block: counted, trained, not run
    assert row.extras["num_tool_calls"] == 1
    assert [c["result"] for c in row.extras["turns"][0]["code_calls"]] == ["4"]


async def test_errors_come_back_as_the_output(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_error")
    first = "```python\nprint(1 / 0)\n```\n"
    script = {"CF-err": [first, "#### 0"]}
    row = Row(await run_batch(fence_worker, script, [sample("CF-err", loop)]), 0)
    (call,) = row.extras["turns"][0]["code_calls"]
    assert call["result"] == "ZeroDivisionError: division by zero"
    assert (call["executed"], call["succeeded"], call["error"]) == (True, False, None)
    assert tok.decode(row.response_ids).startswith(first + "```output\nZeroDivisionError: division by zero\n```\n")
    assert (row.extras["num_executed_calls"], row.extras["num_successful_calls"]) == (1, 0)


async def test_blocks_past_the_cap_are_answered_not_run_instead_of_left_to_be_invented(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_cap", max_calls_per_turn=1, max_calls_per_trajectory=2)
    first, second = "```python\nprint(1)\n```\n", "Again:\n```python\nprint(2)\n```\n"
    third = "and\n```python\nprint(3)\n```"  # then <|im_end|>: a block that ends the turn
    out = await run_batch(fence_worker, {"CF-cap": [first, second, third, "#### 1"]}, [sample("CF-cap", loop)])
    row = Row(out, 0)
    assert all("stop" in call for call in fence_worker.llm_client.calls[:3])  # it still pauses at every fence
    refused = "Not run: at most 1 code executions per turn."
    assert tok.decode(row.response_ids).startswith(
        first + "```output\n1\n```\n" + second + f"```output\n{refused}\n```\n" + third
    )
    calls = row.extras["turns"][0]["code_calls"]
    assert [(c["result"], c["executed"], c["error"]) for c in calls] == [("1", True, None), (refused, False, "limit")]
    tool_turn = row.extras["turns"][1]
    assert tool_turn["role"] == "tool" and tool_turn["malformed_tool_calls"] == [refused]
    assert row.extras["num_invented_outputs"] == 0 and row.reason == "final_answer"
    assert (row.extras["num_tool_calls"], row.extras["num_executed_calls"], row.extras["num_tool_errors"]) == (2, 1, 1)


async def test_the_same_code_is_not_run_twice(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_repeat")
    block = "```python\nprint(6 * 7)\n```\n"
    out = await run_batch(fence_worker, {"CF-rep": [block, "Hmm.\n" + block, "#### 42"]}, [sample("CF-rep", loop)])
    row = Row(out, 0)
    repeated = "Not run: this exact code already ran above; its output will not change."
    text = tok.decode(row.response_ids)
    assert text.startswith(block + "```output\n42\n```\nHmm.\n" + block + f"```output\n{repeated}\n```\n")
    calls = row.extras["turns"][0]["code_calls"]
    assert [(c["error"], c["executed"]) for c in calls] == [(None, True), ("repeated", False)]
    assert (row.extras["num_executed_calls"], row.extras["num_successful_calls"]) == (1, 1)


async def test_a_block_that_ends_the_turn_runs_as_a_tool_round(fence_worker):
    tok = fence_worker.tokenizer
    loop = fence_loop("cf_round")
    script = {"CF-round": ["```python\nprint(3 * 3)\n```", "#### 9"]}
    row = Row(await run_batch(fence_worker, script, [sample("CF-round", loop)]), 0)
    turns = row.extras["turns"]
    assert [t["role"] for t in turns] == ["assistant", "tool", "assistant"]
    assert turns[1]["tool_calls"][0]["result"] == "9"
    assert "9" in tok.decode(row.span(turns[1])[0])
    assert row.extras["num_tool_rounds"] == 1 and row.extras["num_successful_calls"] == 1


async def test_blocks_in_thinking_and_in_other_languages_are_not_run(fence_worker):
    loop = fence_loop("cf_not_calls")
    first = "<think>\n```python\nprint('no')\n```\n"
    second = "</think>\n```bash\necho no\n```\n"
    row = Row(await run_batch(fence_worker, {"CF-not": [first, second, "#### 0"]}, [sample("CF-not", loop)]), 0)
    assert row.extras["num_tool_calls"] == 0 and "code_calls" not in row.extras["turns"][0]
    assert len(fence_worker.llm_client.calls) == 3  # paused twice at fences, resumed both times


async def test_the_code_fence_tool_is_described_by_the_prompt_not_the_template(fence_worker):
    loop = fence_loop("cf_prompt")
    out = await run_batch(fence_worker, {"CF-prompt": ["#### 1"]}, [sample("CF-prompt", loop)])
    prompt = fence_worker.tokenizer.decode(Row(out, 0).prompt_ids)
    assert "python_exec" not in prompt and "<tools>" not in prompt


async def test_recorded_code_fence_trajectories_replay_token_exact_and_show_in_the_viewer(fence_worker, tmp_path):
    from extensions.rollout.convert import to_record
    from extensions.rollout.records import read_jsonl, write_jsonl
    from extensions.rollout.replay import replay
    from extensions.rollout.view import render_html
    from extensions.verl_compat import agent_loop_registry

    # the experiment's entry, as the worker's agent_loop_config_path registers it (replay reads that file)
    agent_loop_registry()["long_workflow"] = dict(yaml.safe_load(LOOPS.read_text())[0])
    script = {
        "CF-rp": [
            "```bash\nls\n```\n",  # the engine pauses at this closing fence too, and simply resumes
            "In Python:\n```python\nprint(6 * 7)\n```\n",
            "Check:\n```python\nprint(42 == 6 * 7)\n```\n",
            "Once more, at the end:\n```python\nprint(1 / 0)\n```",
            "#### 42",
        ]
    }
    out = await run_batch(fence_worker, script, [sample("CF-rp", "long_workflow")])
    records = [to_record(out, 0, fence_worker.tokenizer)]
    (record,) = records
    assert [t.role for t in record.turns] == ["assistant", "tool", "assistant"]
    assert [c.result for c in record.turns[0].code_calls] == ["42", "True"]
    assert record.turns[1].tool_calls[0].result == "ZeroDivisionError: division by zero"
    write_jsonl(records, tmp_path / "t.jsonl")
    problems, _ = await replay(read_jsonl(tmp_path / "t.jsonl"), fence_worker.config, tmp_path / "replay")
    assert problems == []
    html = render_html(read_jsonl(tmp_path / "t.jsonl"))
    assert "print(6 * 7)" in html and "code-call" in html


def test_code_fence_settings_are_checked_against_the_format_and_the_tools():
    from extensions.code_fence_loop import code_fence_settings
    from extensions.errors import ConfigError
    from extensions.loop_settings import parse_settings

    tools = {"python_exec": object()}
    fenced = parse_settings({"code_fence": {"max_calls_per_turn": 2}}, entry="e")
    with pytest.raises(ConfigError, match=r"agent loop 'e': 'code_fence' settings need tool_parser: code_fence"):
        code_fence_settings(fenced, "auto", "e", tools)
    assert code_fence_settings(fenced, "code_fence", "e", tools).max_calls_per_turn == 2
    assert code_fence_settings(parse_settings({}, entry="e"), "code_fence", "e", tools).tool == "python_exec"
    with pytest.raises(ConfigError, match=r"code_fence.tool 'python_exec' is not in the tool config; tools: "):
        code_fence_settings(fenced, "code_fence", "e", {"calculator": object()})
