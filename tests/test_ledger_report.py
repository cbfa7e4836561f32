"""experiments/ledger_folding/analysis/ledger_report.py: what a ledger trajectory did, counted from its recorded turns."""

from __future__ import annotations

import csv
import gzip
import json
import random
from pathlib import Path

from tests.scripts import LEDGER_ANALYSIS, load_script


def call(page: object) -> dict:
    return {"name": "read_page", "arguments": json.dumps({"page": page})}


BALANCE = "The ledger has 7 pages. Account ACC-101A opened with a balance of 300. ..."
LOOKUP = "The ledger has 7 pages. Exactly one transaction in it has the memo reference ref 123456. What is ...?"


def record(index: int, *, acc: float, question: str = BALANCE, pages: list[str] | None = None) -> dict:
    # as the driver records them: each call on the tool turn that ran it and, copied, on the assistant turn
    first = [
        {"role": "assistant", "text": "call", "tool_calls": [call(1)]},
        {"role": "tool", "text": "page 1", "tool_calls": [call(1)]},
        {"role": "assistant", "text": "call", "tool_calls": [call(2), call("two"), call(8)]},
        {"role": "tool", "text": "page 2, errors", "tool_calls": [call(2), call("two"), call(8)]},
        {"role": "user", "text": "Your context is almost full", "fold": True},
        {"role": "assistant", "summary": True, "text": '```json\n{"name": "read_page", "arguments": {"page": 1}}\n```'},
    ]
    second = [
        {"role": "assistant", "text": "call", "tool_calls": [call(2), call(7)]},
        {"role": "tool", "text": "pages 2 and 7", "tool_calls": [call(2), call(7)]},
        {"role": "user", "text": "Your context is almost full", "fold": True},
        {"role": "assistant", "summary": True, "text": "<summary>read 1, 2, 7</summary>"},
    ]
    last = [{"role": "assistant", "text": "The balance is\n#### 42"}]
    return {
        "index": index,
        "segments": [{"turns": first}, {"turns": second}],
        "turns": last,
        "termination_reason": "final_answer",
        "reward_extra_info": {"acc": acc},
        "tools_kwargs": {"read_page": {"create_kwargs": {"pages": pages or ["p"] * 7}}},
        "raw_prompt": [
            {"role": "system", "content": "You are a careful bookkeeper."},
            {"role": "user", "content": question},
        ],
    }


def test_figures_count_pages_segments_and_what_each_summary_turn_held() -> None:
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    # each call once; "two" and 8 (of 7 pages) are not pages read
    assert report.pages_read(record(0, acc=1.0)) == [1, 2, 2, 7]
    assert report.figures(record(0, acc=1.0)) == {
        "acc": 1.0,
        "answered": True,
        "pages": 7,
        "distinct_pages": 3,
        "highest_page": 7,
        "segments": 3,
        "summary_turns": 2,
        "summaries_tagged": 1,
        "summaries_calling_a_tool": 1,
        "reason": "final_answer",
        "needle_page": None,
        "needle_line": None,
        "reached_needle": False,
    }


def test_the_loops_summary_tagged_wins_and_older_records_need_a_closing_tag() -> None:
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    assert not report.tagged({"text": "<summary>read 1, 2", "summary_tagged": False})
    assert report.tagged({"text": "read 1, 2</summary>", "summary_tagged": True})  # the loop wrote the opening
    assert report.tagged({"text": "<summary>read 1</summary>"}) and not report.tagged({"text": "<summary>read 1"})


def test_main_writes_one_csv_row_per_variant(tmp_path: Path, monkeypatch) -> None:
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    (tmp_path / "fold").mkdir()
    with gzip.open(tmp_path / "fold" / "trajectories.jsonl.gz", "wt") as f:
        f.write(json.dumps(record(0, acc=1.0)) + "\n" + json.dumps(record(1, acc=0.0)) + "\n")
    figs = [report.figures(r) for r in report.read_records(tmp_path / "fold")]
    assert report.variant_row("fold", figs) == {
        "variant": "fold",
        "trajectories": 2,
        "accuracy": 0.5,
        "answered": 2,
        "distinct_pages_mean": 3,
        "highest_page_mean": 7,
        "read_all_pages": 0,
        "segments_mean": 3,
        "summary_turns": 4,
        "summaries_tagged": 2,
        "summaries_calling_a_tool": 2,
        "needle_reached": "",
        "accuracy_when_reached": "",
        "accuracy_by_needle_line": "",
        "termination_reasons": "final_answer 2",
    }
    monkeypatch.setitem(report.main.__globals__, "plot", lambda *a: tmp_path / "pages.png")  # PNG: matplotlib
    assert report.main([str(tmp_path), "fold"]) == 0
    with open(tmp_path / "variants.csv") as f:
        assert [r["accuracy"] for r in csv.DictReader(f)] == ["0.5"]


def test_lookup_ledgers_count_who_read_the_asked_transactions_page() -> None:
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    needle = "T00009 | day 3 | ACC-101A | deposit | 42 | rent 1234 Contoso ref 123456"

    def on_page(k: int) -> list[str]:  # every page's footer names the reference (--footer check / submit)
        footer = "End of page {}. If ref 123456 is on this page, call submit_answer with its amount."
        pages = ["p"] * (k - 1) + [needle] + ["p"] * (7 - k)
        return [f"{page}\n{footer.format(n)}" for n, page in enumerate(pages, start=1)]

    read = report.figures(record(0, acc=1.0, question=LOOKUP, pages=on_page(7)))  # pages 1, 2 and 7 are read
    missed = report.figures(record(1, acc=0.0, question=LOOKUP, pages=on_page(5)))
    assert (read["needle_page"], read["reached_needle"], missed["needle_page"], missed["reached_needle"]) == (
        7, True, 5, False
    )  # fmt: skip
    row = report.variant_row("react", [read, missed])
    assert (row["needle_reached"], row["accuracy_when_reached"], row["accuracy_by_needle_line"]) == (1, 1.0, "1: 1/1")


def test_a_submit_answer_call_that_ended_the_trajectory_counts_as_an_answer() -> None:
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    call = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": 214}}\n</tool_call>'
    assert report.answered(call, "final_answer") and report.answered("It is 4.\n#### 4", "final_answer")
    assert not report.answered(call, "max_tool_rounds")  # not run: a later limit ended it
    assert not report.answered(
        '<tool_call>\n{"name": "read_page", "arguments": {"page": 2}}\n</tool_call>', "final_answer"
    )


def test_a_flagged_ledgers_needle_is_the_line_that_ends_with_the_flag() -> None:
    """--ref-style flag: the question names no reference; the transaction's line ends with ``| DISPUTED``, and the
    footers (which name the flag too) do not count."""
    from extensions.data.ledger import LedgerSpec, make_ledger, question_text

    report = load_script("ledger_report", LEDGER_ANALYSIS)
    spec = LedgerSpec(pages=6, per_page=4, question="lookup", ref_style="flag", footer="submit", answer_tool=True)
    ledger = make_ledger(random.Random("ledger/test/0/1"), spec)
    flagged = report.figures(record(0, acc=0.0, question=question_text(ledger)[1], pages=ledger.pages))
    assert ledger.needle[2] > 1 and flagged["needle_page"] == ledger.needle[2]  # not page 1, whose footer names it
    lines = [line for line in ledger.pages[ledger.needle[2] - 1].splitlines() if line.startswith("T")]
    assert (
        lines[flagged["needle_line"] - 1].endswith("| DISPUTED")
        and f"| {ledger.needle[1]} |" in lines[flagged["needle_line"] - 1]
    )


def test_accuracy_by_the_needles_line_counts_right_over_reached_per_line() -> None:
    """The H100 warm start copied the page's first amount: right when the flag was on line 1, not below it."""
    report = load_script("ledger_report", LEDGER_ANALYSIS)
    figs = [{"acc": acc, "reached_needle": reached, "needle_line": line, "needle_page": 3}
            for acc, reached, line in [(1.0, True, 1), (1.0, True, 1), (0.0, True, 3), (1.0, True, 3),
                                       (0.0, True, 4), (0.0, False, 2)]]  # fmt: skip
    assert report.needle_figures(figs) == {
        "needle_reached": 5,
        "accuracy_when_reached": 0.6,
        "accuracy_by_needle_line": "1: 2/2; 3: 1/2; 4: 0/1",  # line 2 was never reached
    }
