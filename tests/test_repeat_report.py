"""experiments/gsm8k_learn/repeat_report.py: what ``code_fence.end_after_repeats`` would cut from recorded replies."""

from __future__ import annotations

from pathlib import Path

import pytest

from extensions.code_fence import output_block
from extensions.code_fence_loop import REPEATED_MESSAGE
from tests.scripts import ROOT, load_script, write_val_dumps

report = load_script("repeat_report", under="experiments/gsm8k_learn")
BLOCK = "```python\nprint(1)\n```\n"
RAN, REFUSED = output_block("1", after=BLOCK), output_block(REPEATED_MESSAGE, after=BLOCK)
COMMITTED = ROOT / "docs" / "results" / "gsm8k-tools-ab-2seed-h200x4" / "tools_s2"


def test_cut_at_ends_after_the_refusal_block():
    text = BLOCK + RAN + "Again\n" + BLOCK + REFUSED + "More\n" + BLOCK + REFUSED + "loop"
    first = len(BLOCK + RAN + "Again\n" + BLOCK + REFUSED.rstrip("\n"))
    assert report.cut_at(text, 1) == first
    assert report.cut_at(text, 2) == len(text) - len("\nloop")
    assert report.cut_at(text, 3) is None and report.cut_at("#### 1", 1) is None


def test_a_synthetic_run(tmp_path: Path):
    looping = BLOCK + RAN + BLOCK + REFUSED + BLOCK + REFUSED + "x " * 40
    rows = [  # as verl dumps them: the prompt and the ground truth beside the output and the reward's keys
        {"input": "q0", "gts": "1", "output": looping, "acc": 0.0, "is_response_budget": 1.0},
        {
            "input": "q1",
            "gts": "1",
            "output": BLOCK + RAN + BLOCK + REFUSED + "#### 1",
            "acc": 1.0,
            "is_response_budget": 0.0,
        },
        {"input": "q2", "gts": "1", "output": "x " * 50, "acc": 0.0, "is_response_budget": 1.0},
        {"input": "q3", "gts": "1", "output": "#### 2", "acc": 1.0, "is_response_budget": 0.0},
    ]
    run = write_val_dumps(tmp_path / "tools_s1", {40: rows})
    one, two = report.cuts(run, [1, 2], list)  # one token a character
    total = sum(len(row["output"]) for row in rows)
    tail = len("\n" + "x " * 40)  # after the second refusal's closing fence
    # bound 1: the looping reply loses its second block and refusal too; the right one its "\n#### 1"
    assert one == report.Cut("tools_s1", 40, 1, 4, 2, 1, total, len(BLOCK + REFUSED) + tail + len("\n#### 1"), 2, 1)
    assert two == report.Cut("tools_s1", 40, 2, 4, 1, 0, total, tail, 2, 1)
    assert report.table([two]).splitlines()[-1] == (
        f"| tools_s1 | 40 | 2 | 1 of 4 | 0 | {tail} of {total} ({100 * tail / total:.1f} %) | 2 -> 1 |"
    )


def test_the_committed_tools_run_at_step_40(capsys: pytest.CaptureFixture[str]):
    """The figures the multi-GPU guide quotes: seed 2, bound 2."""
    assert report.main([str(COMMITTED), "--bounds", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "| tools_s2 | 40 | 2 | 64 of 1319 | 0 | 54,557 of 329,389 (16.6 %) | 80 -> 16 |"
    assert out[-2] == "| tools_s2 | 0 | 2 | 7 of 1319 | 0 | 3,527 of 404,116 (0.9 %) | 23 -> 19 |"


def test_a_bound_below_one_is_refused(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        report.main([str(COMMITTED), "--bounds", "0"])
    assert "--bounds: end_after_repeats is at least 1, got [0]" in capsys.readouterr().err


def test_a_refused_block_that_ended_its_turn_is_cut_before_the_tool_message():
    turn = BLOCK + RAN + "Once more:\n" + BLOCK.rstrip("\n")
    text = turn + f"\nuser\n<tool_response>\n{REPEATED_MESSAGE}\n</tool_response>\nassistant\n#### 1"
    assert report.cut_at(text, 1) == len(turn) + 1  # the turn's tokens stay; the tool message and after go
    unclosed = "x " + REPEATED_MESSAGE + " and no fence after it"
    assert report.cut_at(unclosed, 1) == len(unclosed)
