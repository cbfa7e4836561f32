"""scripts/ledger_fold_probe.py: how the first turn after a fold is classified, and the fold settings it reads."""

from __future__ import annotations

from tests.scripts import load_script


def test_the_first_turn_after_a_fold_is_read_against_the_last_page_read() -> None:
    probe = load_script("ledger_fold_probe")
    call = '{{"name": "read_page", "arguments": {{"page": {}}}}}'
    assert [probe.first_turn(call.format(k), 4) for k in (5, 4, 9)] == ["next", "same", "another page"]
    assert probe.first_turn('{"name": "submit_answer", "arguments": {"answer": 12}}', 4) == "submit"
    assert probe.first_turn("Ledger page 5 of 30", 4) == "other"


def test_it_folds_as_the_experiments_folding_flagged_loop_does() -> None:
    fold = load_script("ledger_fold_probe").loop_fold_settings()
    assert (fold["summary_prefix"], fold["summary_max_tokens"], fold["carry_last_observation"]) == (
        "<summary>\nPages read so far: 1 to", 96, True
    )  # fmt: skip
    assert fold["instruction"].startswith("Your context is almost full and will be cleared.")
