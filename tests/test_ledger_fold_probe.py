"""experiments/ledger_folding/analysis/ledger_fold_probe.py: how the first turn after a fold is classified, and the fold settings it reads."""

from __future__ import annotations

from tests.scripts import LEDGER_ANALYSIS, load_script


def test_the_first_turn_after_a_fold_is_read_against_the_last_page_read() -> None:
    probe = load_script("ledger_fold_probe", LEDGER_ANALYSIS)
    call = '{{"name": "read_page", "arguments": {{"page": {}}}}}'
    assert [probe.first_turn(call.format(k), 4) for k in (5, 4, 9)] == ["next", "same", "another page"]
    assert probe.first_turn('{"name": "submit_answer", "arguments": {"answer": 12}}', 4) == "submit"
    assert probe.first_turn("Ledger page 5 of 30", 4) == "other"


def test_it_folds_as_the_experiments_folding_flagged_loop_does() -> None:
    fold = load_script("ledger_fold_probe", LEDGER_ANALYSIS).loop_fold_settings()
    assert (fold["summary_prefix"], fold["summary_max_tokens"], fold["carry_last_observation"]) == (
        "<summary>\nPages read so far: 1 to", 96, True
    )  # fmt: skip
    assert fold["instruction"].startswith("Your context is almost full and will be cleared.")


def test_both_probes_build_the_react_conversation_from_one_helper() -> None:
    import random

    from extensions.data.ledger import LedgerSpec, make_ledger, question_text

    needle = load_script("ledger_needle_probe", LEDGER_ANALYSIS)
    spec = LedgerSpec(pages=5, per_page=4, question="lookup", ref_style="flag", footer="submit", answer_tool=True)
    ledger = make_ledger(random.Random("ledger/test/0/0"), spec)
    messages = needle.react_messages(ledger, 2, answer_tool=True, footer="submit")
    system, question = question_text(ledger, answer_tool=True, footer="submit")
    call = {"type": "function", "function": {"name": "read_page", "arguments": {"page": 2}}}
    assert messages[:2] == [{"role": "system", "content": system}, {"role": "user", "content": question}]
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "assistant", "tool"]
    assert messages[4:] == [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": ledger.pages[1]},
    ]
    assert [t["function"]["name"] for t in needle.tool_schemas(answer_tool=True)] == ["read_page", "submit_answer"]
    assert [t["function"]["name"] for t in needle.tool_schemas(answer_tool=False)] == ["read_page"]
