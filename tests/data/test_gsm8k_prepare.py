"""python -m extensions.data.gsm8k: exact parquet contents for hand-written problems."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from extensions.data.gsm8k import main, prepare

SYSTEM = (
    "You are a careful math assistant. Solve the user's problem step by step.\n"
    "You can use these tools:\n"
    "- python_exec: runs a short Python 3 program and returns what it prints; use print() to see values.\n"
    "- calculator: evaluates one arithmetic expression, such as (48 + 24) / 3, and returns its value.\n"
    "- check_answer: checks a candidate final answer against the reference and says whether it is right.\n"
    "When you are done, write the final answer on its own last line as #### followed by the number (a "
    "\\boxed{} number is read too): the number only, without units or words, and outside any code block."
)
SYSTEM_HELD_OUT = SYSTEM.replace(
    "- check_answer: checks a candidate final answer against the reference and says whether it is right.\n", ""
)
GROUND_TRUTHS = ["72", "1000", "2.5"]
ALL_TOOLS = ["python_exec", "calculator", "check_answer"]
RowFn = Callable[..., dict[str, Any]]


@pytest.fixture
def expected_row(problems: list[dict[str, str]]) -> RowFn:
    """The exact sample written for problem ``index`` (all tools, code_verify interaction)."""
    return functools.partial(build_expected, problems)


def build_expected(problems: list[dict[str, str]], index: int, split: str = "train") -> dict[str, Any]:
    """The held-out split ("test") never offers the oracle check_answer."""
    problem, truth = problems[index], GROUND_TRUTHS[index]
    held_out = split == "test"
    system = SYSTEM_HELD_OUT if held_out else SYSTEM
    extra_info = {
        "split": split,
        "index": index,
        "question": problem["question"],
        "answer": problem["answer"],
        "tools_kwargs": {"check_answer": {"create_kwargs": {"ground_truth": truth}}},
        "tool_selection": ALL_TOOLS[:2] if held_out else ALL_TOOLS,
        "interaction_kwargs": {"name": "code_verify", "query": problem["question"], "ground_truth": truth},
    }
    if held_out:
        del extra_info["tools_kwargs"]
    return {
        "data_source": "longflow/gsm8k",
        "agent_name": "long_workflow",
        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": problem["question"]}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": extra_info,
    }


def read(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def test_exact_parquet_contents(problems_jsonl: str, tmp_path: Path, expected_row: RowFn) -> None:
    written = prepare(problems_jsonl, tmp_path / "out", interaction="code_verify")
    assert written == {"train": tmp_path / "out" / "train.parquet"}
    assert read(written["train"]) == [expected_row(0), expected_row(1), expected_row(2)]
    schema = pq.read_schema(written["train"])
    assert schema.names == ["data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info"]
    assert schema.field("extra_info").type.field("index").type == pa.int64()


def test_val_size_holds_out_seeded_rows(problems_jsonl: str, tmp_path: Path, expected_row: RowFn) -> None:
    written = prepare(problems_jsonl, tmp_path, interaction="code_verify", val_size=1, seed=0)
    assert read(written["train"]) == [expected_row(0), expected_row(2)]
    assert read(written["test"]) == [expected_row(1, split="test")]


def test_limit_split_and_data_source(problems_jsonl: str, tmp_path: Path) -> None:
    written = prepare(
        problems_jsonl, tmp_path, interaction="code_verify", split="dev", limit=2, data_source="openai/gsm8k"
    )
    rows = read(written["dev"])
    assert [row["extra_info"]["split"] for row in rows] == ["dev", "dev"]
    assert [row["data_source"] for row in rows] == ["openai/gsm8k", "openai/gsm8k"]


def test_tools_without_create_kwargs_and_no_interaction(
    problems_jsonl: str, tmp_path: Path, problems: list[dict[str, str]]
) -> None:
    row = read(prepare(problems_jsonl, tmp_path, tools=["python_exec"], limit=1)["train"])[0]
    assert row["extra_info"] == {
        "split": "train",
        "index": 0,
        "question": problems[0]["question"],
        "answer": problems[0]["answer"],
        "tool_selection": ["python_exec"],
    }
    assert row["prompt"][0]["content"] == (
        "You are a careful math assistant. Solve the user's problem step by step.\n"
        "You can use these tools:\n"
        "- python_exec: runs a short Python 3 program and returns what it prints; use print() to see values.\n"
        "When you are done, write the final answer on its own last line as #### followed by the number (a "
        "\\boxed{} number is read too): the number only, without units or words, and outside any code block."
    )


def test_no_tools(problems_jsonl: str, tmp_path: Path) -> None:
    row = read(prepare(problems_jsonl, tmp_path, tools=[], limit=1)["train"])[0]
    assert set(row["extra_info"]) == {"split", "index", "question", "answer", "tool_selection"}
    assert row["extra_info"]["tool_selection"] == []  # no tools, not "all of them"
    assert "tools" not in row["prompt"][0]["content"]


def test_parquet_input(tmp_path: Path, problems: list[dict[str, str]], expected_row: RowFn) -> None:
    source = tmp_path / "problems.parquet"
    pq.write_table(pa.Table.from_pylist(problems), source)
    written = prepare(str(source), tmp_path / "out", interaction="code_verify")
    assert read(written["train"]) == [expected_row(0), expected_row(1), expected_row(2)]


def test_hugging_face_id_uses_the_loader(tmp_path: Path, problems: list[dict[str, str]], expected_row: RowFn) -> None:
    calls = []

    def fake_load_dataset(name: str, config: str | None, *, split: str) -> list[dict[str, str]]:
        calls.append((name, config, split))
        return problems

    written = prepare("openai/gsm8k", tmp_path, interaction="code_verify", loader=fake_load_dataset)
    assert calls == [("openai/gsm8k", "main", "train")]
    assert read(written["train"]) == [expected_row(0), expected_row(1), expected_row(2)]


def test_cli(problems_jsonl: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, expected_row: RowFn) -> None:
    args = ["--input", problems_jsonl, "--output-dir", str(tmp_path / "cli"), "--agent-name", "long_workflow"]
    args += ["--interaction", "code_verify", "--val-size", "1"]  # default tools: the oracle only in train
    with caplog.at_level(logging.INFO, logger="extensions.data.gsm8k"):
        assert main(args) == 0
    assert read(tmp_path / "cli" / "train.parquet") == [expected_row(0), expected_row(2)]
    assert read(tmp_path / "cli" / "test.parquet") == [expected_row(1, split="test")]
    assert [r.getMessage() for r in caplog.records if r.name == "extensions.data.gsm8k"] == [
        f"wrote 2 rows to {tmp_path / 'cli' / 'train.parquet'}",
        f"wrote 1 rows to {tmp_path / 'cli' / 'test.parquet'}",
    ]


def test_cli_reports_errors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["--input", str(missing), "--output-dir", str(tmp_path)]) == 2
    ours = [r for r in caplog.records if r.name == "extensions.data.gsm8k"]
    assert ours[-1].levelname == "ERROR"
    assert ours[-1].getMessage().startswith(f"--input {missing}: no such file")


def test_split_named_like_the_holdout_is_written(tmp_path):
    from extensions.data.gsm8k import VAL_SPLIT, prepare

    source = tmp_path / "in.jsonl"
    source.write_text('{"question": "1+1?", "answer": "#### 2"}\n{"question": "2+2?", "answer": "#### 4"}\n')
    written = prepare(str(source), tmp_path / "out", split=VAL_SPLIT)
    assert list(written) == [VAL_SPLIT] and written[VAL_SPLIT].name == f"{VAL_SPLIT}.parquet"
    assert written[VAL_SPLIT].is_file()
