"""--tools '' means no tools (through the loop), --tool-format code_fence, and no oracle on held-out rows."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from extensions.data.gsm8k import main, prepare
from extensions.data.prompts import CODE_FENCE_PROMPT
from extensions.errors import ConfigError
from tests.conftest import Row, run_batch

NO_TOOLS_SYSTEM = (
    "You are a careful math assistant. Solve the user's problem step by step.\n"
    "When you are done, write the final answer on its own last line as #### followed by the number (a "
    "\\boxed{} number is read too): the number only, without units or words, and outside any code block."
)


def rows(path):
    return pq.read_table(path).to_pylist()


async def test_empty_tools_offer_no_tool_through_the_loop(worker, problems_jsonl, tmp_path):
    assert main(["--input", problems_jsonl, "--output-dir", str(tmp_path / "none"), "--tools", ""]) == 0
    assert main(["--input", problems_jsonl, "--output-dir", str(tmp_path / "all")]) == 0
    none, every = rows(tmp_path / "none" / "train.parquet")[0], rows(tmp_path / "all" / "train.parquet")[0]
    assert none["prompt"][0]["content"] == NO_TOOLS_SYSTEM
    assert none["extra_info"]["tool_selection"] == []
    samples = [
        {"raw_prompt": r["prompt"], "agent_name": "long_workflow", "extra_info": {**r["extra_info"], "index": i}}
        for i, r in enumerate([none, every])
    ]
    samples[1]["extra_info"]["tool_selection"] = None  # the worker's test tools, all of them
    samples[1]["raw_prompt"] = [samples[1]["raw_prompt"][0], {"role": "user", "content": "MARK-all"}]
    samples[0]["raw_prompt"] = [samples[0]["raw_prompt"][0], {"role": "user", "content": "MARK-none"}]
    out = await run_batch(worker, {"MARK-none": ["#### 72"], "MARK-all": ["#### 72"]}, samples)
    prompt_none = worker.tokenizer.decode(Row(out, 0).prompt_ids)
    prompt_all = worker.tokenizer.decode(Row(out, 1).prompt_ids)
    assert "<tools>" not in prompt_none and '"name": "echo"' not in prompt_none
    assert "<tools>" in prompt_all and '"name": "echo"' in prompt_all


def test_code_fence_format_describes_the_fence_and_offers_python_exec_only(problems_jsonl, tmp_path):
    prepare(problems_jsonl, tmp_path, tools=("python_exec",), tool_format="code_fence")
    row = rows(tmp_path / "train.parquet")[0]
    assert CODE_FENCE_PROMPT in row["prompt"][0]["content"]
    assert row["extra_info"]["tool_selection"] == ["python_exec"]
    with pytest.raises(ConfigError, match=r"--tool-format code_fence runs python_exec only; --tools gave"):
        prepare(problems_jsonl, tmp_path / "x", tools=("python_exec", "calculator"), tool_format="code_fence")


def test_held_out_rows_never_get_an_oracle(problems_jsonl, tmp_path):
    with pytest.raises(ConfigError) as error:
        prepare(problems_jsonl, tmp_path, split="test", tools=("python_exec", "check_answer"))
    assert str(error.value) == (
        "--tools 'check_answer': an oracle tool (it knows the answer) is never offered on the held-out 'test' "
        "split; drop it from --tools for validation data"
    )
    # by default the held-out split simply leaves the oracle out; the training split keeps it
    written = prepare(problems_jsonl, tmp_path / "d", val_size=1)
    assert rows(written["test"])[0]["extra_info"]["tool_selection"] == ["python_exec", "calculator"]
    assert rows(written["train"])[0]["extra_info"]["tool_selection"] == ["python_exec", "calculator", "check_answer"]
