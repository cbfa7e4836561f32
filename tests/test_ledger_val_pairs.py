"""experiments/ledger_folding/analysis/ledger_val_pairs.py: validation dumps split into their folding and ReAct (VAL_ALSO) trajectories, by ledger."""

from __future__ import annotations

import csv
import json
import lzma
from pathlib import Path

import pytest

from tests.scripts import LEDGER_ANALYSIS, load_script

TERMS = ("term_final_answer", "term_max_segments", "term_response_budget")
UNCLOSED = "<tool_call>read_page 1\nTool call 1 has no closing </tool_call> tag."  # no page 1 read


def page(rows: str) -> str:
    return f"<tool_response>\nLedger page 1 of 30\n{rows}\nEnd of page 1 of 30.</tool_response>"


def row(uid: str, output: str, score: float, ended: str, answer: str) -> dict:
    return {"uid": uid, "input": "the same prompt", "output": output, "score": score, "gts": answer,
            **{t: float(t == f"term_{ended}") for t in TERMS}}  # fmt: skip


def write_dump(path: Path, rows: list[dict]) -> None:
    with lzma.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def ledger_rows(step: int, fold_right: bool) -> list[dict]:
    """Two ledgers (answers 11 and 22); ledger 11's folding trajectory is right or runs out of segments."""
    a, b = page("T1 | 11 | DISPUTED"), page("T9 | 5")
    fold_a = (
        [row(f"a{step}_0_0", a, 0.0, "folded", "11"), row(f"a{step}_0_1", "submit 11", 1.0, "final_answer", "11")]
        if fold_right
        else [row(f"a{step}_0_{i}", a if i == 0 else "read_page 31", 0.0, "max_segments", "11") for i in range(3)]
    )
    return [
        *fold_a,
        row(f"r{step}_0_0", a, 0.0, "response_budget", "11"),
        row(f"s{step}_0_0", b, 0.0, "response_budget", "22"),  # ReAct first: the tie must be broken by the ending
        row(f"b{step}_0_0", b, 1.0, "final_answer", "22"),  # no fold: one row, like ReAct's
    ]


def test_pairs_fold_and_react_per_ledger_and_explains_the_misses(tmp_path: Path, capsys) -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    write_dump(tmp_path / "val_step0.jsonl.xz", ledger_rows(0, fold_right=True))
    write_dump(tmp_path / "val_step30.jsonl.xz", ledger_rows(30, fold_right=False))
    assert vp.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "step 0: 2 ledgers, folding right 2, ReAct (truncated) right 0" in out
    assert "step 30: 2 ledgers, folding right 1, ReAct (truncated) right 0" in out
    assert "right->wrong 1, wrong->right 0, paired difference -50.0 ± 50.0 points" in out
    assert "wrong folding trajectories shown the flagged line, ended max_segments: 1" in out
    assert (
        "step 0, folding right/shown by where the flagged page came in its segment: first 1/1, later 0/0, never 1/1"
        in out
    )
    assert (
        "step 30, folding right/shown by where the flagged page came in its segment: first 0/1, later 0/0, never 1/1"
        in out
    )
    with (tmp_path / "val_pairs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["step"], r["answer"], r["fold_right"], r["fold_segments"], r["react_right"]) for r in rows] == [
        ("0", "11", "1", "2", "0"),
        ("0", "22", "1", "1", "0"),
        ("30", "11", "0", "3", "0"),
        ("30", "22", "1", "1", "0"),
    ]


def test_a_dump_with_one_ledger_missing_its_react_twin_is_refused_by_name(tmp_path: Path) -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    write_dump(tmp_path / "val_step0.jsonl.xz", ledger_rows(0, fold_right=True)[:2] + ledger_rows(0, True)[3:])
    with pytest.raises(
        SystemExit,
        match=r"val_step0.jsonl.xz: 1 trajectories of one ledger \(answer 11\), expected 2 as for the others",
    ):
        vp.main([str(tmp_path)])


def test_a_run_validated_without_val_also_is_folding_only(tmp_path: Path, capsys) -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    write_dump(tmp_path / "val_step0.jsonl.xz", ledger_rows(0, fold_right=True))  # with VAL_ALSO: one run
    fold_only = [r for r in ledger_rows(30, fold_right=False) if r["uid"][0] in "ab"]  # without: another run
    write_dump(tmp_path / "val_step30.jsonl.xz", fold_only)
    assert vp.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "step 30: 2 ledgers, folding right 1, ReAct not validated (no VAL_ALSO)" in out
    assert "right->wrong 1, wrong->right 0, paired difference -50.0 ± 50.0 points" in out
    with (tmp_path / "val_pairs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["step"], r["answer"], r["fold_right"], r["react_right"]) for r in rows] == [
        ("0", "11", "1", "0"),
        ("0", "22", "1", "0"),
        ("30", "11", "0", ""),
        ("30", "22", "1", ""),
    ]


def test_two_single_rows_alike_but_scored_differently_are_refused(tmp_path: Path) -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    b = page("T9 | 5")
    rows = [row("x_0_0", b, 1.0, "final_answer", "22"), row("y_0_0", b, 0.0, "final_answer", "22")]
    write_dump(tmp_path / "val_step0.jsonl.xz", rows)
    with pytest.raises(SystemExit, match=r"\(answer 22\) cannot be told apart .* and scored differently"):
        vp.main([str(tmp_path)])


def test_where_the_flagged_page_came_in_its_segment() -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    plain, flagged, cut = page("T9 | 5"), page("T1 | 11 | DISPUTED"), "Ledger page 2 of 30\nT1 | 11 | DISPUTED\n..."
    assert vp.flag_place([{"output": flagged}]) == "first"
    assert vp.flag_place([{"output": plain + flagged}]) == "later"
    assert vp.flag_place([{"output": plain + cut}, {"output": flagged + plain}]) == "first"  # re-read after a fold
    assert vp.flag_place([{"output": plain + cut}]) == "never"  # only seen cut short


def test_a_trajectory_that_read_no_page_1_is_kept_and_left_out_of_the_pairs(tmp_path: Path, capsys) -> None:
    # the weak warm start (docs/results/ledger-fold-weak-start-h100): its first call never ran, so no page names
    # the ledger; it still counts in its step's score, and the difference is also given unpaired
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    a, b = page("T1 | 11 | DISPUTED"), page("T9 | 5")
    step0 = [row("u0_0_0", UNCLOSED, 0.0, "max_assistant_turns", "11"), row("v0_0_0", b, 1.0, "final_answer", "22")]
    step15 = [row("u1_0_0", a, 1.0, "final_answer", "11"), row("v1_0_0", b, 1.0, "final_answer", "22")]
    write_dump(tmp_path / "val_step0.jsonl.xz", step0 + [row("w0_0_0", UNCLOSED, 0.0, "max_assistant_turns", "33")])
    write_dump(tmp_path / "val_step15.jsonl.xz", step15 + [row("w1_0_0", UNCLOSED, 0.0, "max_assistant_turns", "33")])
    assert vp.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "step 0: 3 ledgers, folding right 1, ReAct not validated (no VAL_ALSO)",
        "step 15: 3 ledgers, folding right 2, ReAct not validated (no VAL_ALSO)",
        "folding, step 0 -> 15: 1 ledgers known at both steps (2 left out: they read no page 1 at step 0 or 15), "
        "no paired difference",
        "folding, step 0 -> 15, all 3 ledgers, unpaired: 33.3 % -> 66.7 %, +33.3 ± 38.5 points (standard error)",
    ]
    with (tmp_path / "val_pairs.csv").open() as f:  # a ledger keeps its number at every step; unread ones have none
        rows = [(r["step"], r["ledger"], r["answer"], r["fold_right"]) for r in csv.DictReader(f)]
    assert rows == [
        ("0", "1", "22", "1"),
        ("0", "", "11", "0"),
        ("0", "", "33", "0"),
        ("15", "0", "11", "1"),
        ("15", "1", "22", "1"),
        ("15", "", "33", "0"),
    ]


def test_a_val_also_dump_with_a_trajectory_that_read_no_page_1_is_refused(tmp_path: Path) -> None:
    vp = load_script("ledger_val_pairs", LEDGER_ANALYSIS)
    rows = ledger_rows(0, fold_right=True) + [row("z_0_0", UNCLOSED, 0.0, "max_assistant_turns", "44")]
    write_dump(tmp_path / "val_step0.jsonl.xz", rows)
    with pytest.raises(SystemExit, match=r"1 trajectories read no page 1 in their first segment, .*\(answers 44\)"):
        vp.main([str(tmp_path)])
