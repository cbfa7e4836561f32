"""experiments/ledger_folding/analysis/ledger_decisions.py: the engine's probability of each tool choice after a page, read from the records."""

from __future__ import annotations

import csv
import json
import lzma
import math
from pathlib import Path

from extensions.qwen_tokenizer import build_qwen_tokenizer
from tests.scripts import LEDGER_ANALYSIS, load_script


def call(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def test_the_choice_after_each_full_page_is_read_with_its_probability(tmp_path: Path, capsys) -> None:
    ld = load_script("ledger_decisions", LEDGER_ANALYSIS)
    tok = build_qwen_tokenizer()
    read, submit = tok.encode(call("read_page", '{"page": 2}')), tok.encode(call("submit_answer", '{"answer": 7}'))
    k_read, k_submit = ld.name_token(tok, read), ld.name_token(tok, submit)
    assert tok.decode([read[k_read]]) == "read" and tok.decode([submit[k_submit]]) == "submit"
    logprobs = [0.0] * (len(read) + len(submit))
    logprobs[k_read], logprobs[len(read) + k_submit] = math.log(0.75), math.log(0.5)
    turns = [
        {"role": "tool", "span": [0, 0], "text": "Ledger page 1 of 2\nT1 | 5\nEnd of page 1 of 2."},
        {"role": "assistant", "span": [0, len(read)], "text": call("read_page", '{"page": 2}')},
        {"role": "tool", "span": [0, 0], "text": "Ledger page 2 of 2\nT2 | 7 | DISPUTED\nEnd of page 2 of 2."},
        {"role": "assistant", "span": [len(read), len(read) + len(submit)], "text": ""},
        {"role": "tool", "span": [0, 0], "text": "Ledger page 3 of 2\n...(truncated)"},  # not a full page: skipped
    ]
    record = {"index": 4, "reward": 1.0, "turns": turns, "response_ids": read + submit, "logprobs": logprobs}
    with lzma.open(tmp_path / "trajectories.jsonl.xz", "wt") as f:
        f.write(json.dumps(record) + "\n")
    assert ld.main([str(tmp_path / "trajectories.jsonl.xz")]) == 0
    out = capsys.readouterr().out
    assert "flagged pages: 1 decisions (submit 1); probability of the choice: min 0.5000" in out
    assert "other pages: 1 decisions (read 1); probability of the choice: min 0.7500" in out
    with (tmp_path / "decisions.csv").open() as f:
        rows = [(r["page"], r["chosen"], float(r["probability"])) for r in csv.DictReader(f)]
    assert rows == [("other", "read", 0.75), ("flagged", "submit", 0.5)]
