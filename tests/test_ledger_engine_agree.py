"""experiments/ledger_folding/analysis/ledger_engine_agree.py: the driver's records and verl's validation dump compared ledger by ledger, as text."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from extensions.qwen_tokenizer import build_qwen_tokenizer
from tests.scripts import LEDGER_ANALYSIS, load_script

TOKENIZER = build_qwen_tokenizer(qwen3_tokens=False)


def page_one(lines: str) -> str:
    return f"Ledger page 1 of 3\nID | Amount\n{lines}\nEnd of page 1 of 3."


def response(text: str) -> dict:
    """A segment as the driver records it: its response tokens, the turn's <|im_end|> included."""
    return {"response_ids": TOKENIZER.encode(text + "<|im_end|>")}


def driver_record(index: int, lines: str, answer: str, texts: list[str], reward: float) -> dict:
    *earlier, last = texts
    return {
        "schema": "verl-longflow/trajectory/v1",
        "index": index,
        "ground_truth": answer,
        "reward": reward,
        "tools_kwargs": {"read_page": {"create_kwargs": {"pages": [page_one(lines), "page 2", "page 3"]}}},
        "segments": [response(t) for t in earlier],
        **response(last),
    }


def dump_rows(uid: str, lines: str, answer: str, texts: list[str], score: float) -> list[dict]:
    """verl's validation rows of one folded trajectory: decoded text, special tokens skipped; the score on each."""
    return [
        {"uid": f"{uid}_0_{i}", "output": text, "gts": answer, "score": score, "term_response_budget": 0.0}
        for i, text in enumerate(texts)
    ]


def write(path: Path, rows: list[dict]) -> Path:
    with lzma.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


READ = '<tool_call>\n{"name": "read_page", "arguments": {"page": 1}}\n</tool_call>\nuser\n<tool_response>\n'


def test_the_same_greedy_text_agrees_and_a_changed_last_segment_is_named(tmp_path: Path, capsys) -> None:
    agree = load_script("ledger_engine_agree", LEDGER_ANALYSIS)
    x, y = "T1 | 11 | DISPUTED", "T2 | 5"
    x_texts = [READ + page_one(x) + "\n</tool_response>", "submit 11"]
    driver = write(
        tmp_path / "trajectories.jsonl.xz",
        [driver_record(0, x, "11", x_texts, 1.0), driver_record(1, y, "22", [READ + page_one(y), "submit 22"], 1.0)],
    )
    dump = write(
        tmp_path / "val_step30.jsonl.xz",
        dump_rows("a", x, "11", x_texts, 1.0) + dump_rows("b", y, "22", [READ + page_one(y), "submit 23"], 0.0),
    )
    assert agree.main([str(dump), str(driver)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2:] == [
        "2 ledgers: A right 1, B right 2, both right 1; every segment's text the same on 1",
        "  answer 22: segments A 2, B 2; first differs at segment 2; right A 0, B 1",
    ]


def test_runs_over_different_ledgers_are_refused(tmp_path: Path) -> None:
    agree = load_script("ledger_engine_agree", LEDGER_ANALYSIS)
    texts = [READ + page_one("T1 | 11"), "submit 11"]
    a = write(tmp_path / "a.jsonl.xz", [driver_record(0, "T1 | 11", "11", texts, 1.0)])
    b = write(tmp_path / "b.jsonl.xz", dump_rows("a", "T1 | 11", "12", texts, 0.0))
    with pytest.raises(SystemExit, match=r"hold different ledgers: 1 only in the first, 1 only in the second"):
        agree.main([str(a), str(b)])
