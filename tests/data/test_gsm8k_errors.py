"""Bad input to python -m extensions.data.gsm8k: each error names the file/row/column and what was expected."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from extensions.data.gsm8k import prepare
from extensions.data.prompts import parse_tools
from extensions.errors import ConfigError, SampleError


def write_lines(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        prepare(str(tmp_path / "gone.jsonl"), tmp_path)
    assert str(info.value) == (
        f"--input {tmp_path / 'gone.jsonl'}: no such file; pass a .jsonl, .json or .parquet file, "
        "or a Hugging Face dataset id such as 'openai/gsm8k'"
    )


def test_unsupported_file_type(tmp_path: Path) -> None:
    source = tmp_path / "rows.csv"
    source.write_text("question,answer\n")
    with pytest.raises(ConfigError) as info:
        prepare(str(source), tmp_path)
    assert str(info.value) == f"--input {source}: unsupported file type '.csv'; expected .jsonl, .json or .parquet"


def test_invalid_json_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "rows.jsonl", ['{"question": "q", "answer": "#### 1"}', "{oops"])
    with pytest.raises(ConfigError) as info:
        prepare(source, tmp_path)
    assert str(info.value) == (
        f"{source}:2: not valid JSON (Expecting property name enclosed in double quotes); "
        'expected one object per line like {"question": "...", "answer": "... #### 72"}'
    )


def test_missing_columns(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "rows.jsonl", [json.dumps({"problem": "1+1?", "solution": "2"})])
    with pytest.raises(SampleError) as info:
        prepare(source, tmp_path)
    assert str(info.value) == (
        f"{source}: missing column(s) 'answer', 'question'; GSM8K rows need 'question' and 'answer' "
        "(found: 'problem', 'solution')"
    )


def bad_rows_file(tmp_path: Path) -> str:
    rows = [
        {"question": "Two plus two?", "answer": "2 + 2 = 4\n#### 4"},
        {"question": "Three times three?", "answer": "3 * 3 = 9, so nine."},
        {"question": "Half of ten?", "answer": "#### five"},
        {"question": "  ", "answer": "#### 1"},
        {"question": "Ten minus one?", "answer": "10 - 1 = 9\n#### 9"},
    ]
    return write_lines(tmp_path / "rows.jsonl", [json.dumps(row) for row in rows])


BAD_ROWS_REPORT = (
    "{source}: 3 of 5 rows are not usable GSM8K rows (0-based row indices): "
    "row 1: answer has no '#### <number>' line; row 2: '#### five' is not a number; "
    "row 3: question is missing or empty. Expected a non-empty 'question' and an 'answer' ending in '#### <number>'"
)


def test_rows_without_a_number_after_hashes_stop_the_run(tmp_path: Path) -> None:
    source = bad_rows_file(tmp_path)
    with pytest.raises(SampleError) as info:
        prepare(source, tmp_path / "out")
    assert str(info.value) == BAD_ROWS_REPORT.format(source=source) + "; fix them or pass --skip-bad-rows to drop them"
    assert not (tmp_path / "out").exists()


def test_skip_bad_rows_drops_and_reports(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = bad_rows_file(tmp_path)
    with caplog.at_level(logging.WARNING, logger="extensions.data.gsm8k"):
        written = prepare(source, tmp_path / "out", skip_bad_rows=True)
    ours = [r for r in caplog.records if r.name == "extensions.data.gsm8k"]
    assert ours[0].getMessage() == "dropping bad rows: " + BAD_ROWS_REPORT.format(source=source)
    rows = pq.read_table(written["train"]).to_pylist()
    assert [(row["extra_info"]["index"], row["reward_model"]["ground_truth"]) for row in rows] == [(0, "4"), (4, "9")]


def test_many_bad_rows_show_the_first_five(tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "rows.jsonl", [json.dumps({"question": f"q{i}", "answer": "none"}) for i in range(8)]
    )
    with pytest.raises(SampleError) as info:
        prepare(source, tmp_path)
    assert str(info.value).startswith(f"{source}: 8 of 8 rows are not usable GSM8K rows")
    assert "row 4: answer has no '#### <number>' line; and 3 more. Expected" in str(info.value)
    assert "row 5" not in str(info.value)


def test_all_option_errors_at_once(problems_jsonl: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        prepare(problems_jsonl, tmp_path, agent_name="", split="test", limit=0, val_size=2, data_source="gsm8k")
    assert str(info.value) == (
        "--agent-name must not be empty\n"
        "--limit 0: must be at least 1\n"
        "--val-size writes test.parquet, so --split must not be 'test'\n"
        "--data-source 'gsm8k': expected one of 'longflow/gsm8k', 'openai/gsm8k'"
    )


def test_val_size_needs_training_rows(problems_jsonl: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        prepare(problems_jsonl, tmp_path, val_size=3)
    assert str(info.value) == "--val-size 3: only 3 usable rows; leave some for 'train'"


def test_unknown_tool() -> None:
    assert parse_tools("python_exec, calculator,,python_exec") == ("python_exec", "calculator")
    assert parse_tools("") == ()
    with pytest.raises(ConfigError) as info:
        parse_tools("python_exec,search")
    assert (
        str(info.value) == "--tools: unknown tool(s) 'search'; valid tools: 'calculator', 'check_answer', 'python_exec'"
    )


def test_hugging_face_id_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real datasets.load_dataset call, forced offline so it fails at once instead of retrying."""
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError) as info:
        prepare("no-such-org/no-such-dataset", tmp_path)
    message = str(info.value)
    assert message.startswith(
        "--input 'no-such-org/no-such-dataset': could not load it as a Hugging Face dataset "
        "(config 'main', split 'train'): "
    )
    assert message.endswith("Offline, download the data elsewhere and pass the .jsonl or .parquet file instead")
