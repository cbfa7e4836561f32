"""scripts/val_compare.py pairs validation rows by prompt: a dump holding a prompt twice (VAL_ALSO runs the same
held-out prompts through a second loop) cannot be paired, and it says so instead of mixing the loops."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.scripts import load_script


def test_repeated_prompts_are_refused(tmp_path: Path) -> None:
    vc = load_script("val_compare")
    (tmp_path / "run" / "val").mkdir(parents=True)
    rows = [{"input": "q1", "gts": "4", "score": 1.0}, {"input": "q2", "gts": "5", "score": 0.0}]
    (tmp_path / "run" / "val" / "0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert {k: v["score"] for k, v in vc.load(tmp_path / "run")[0].items()} == {"q1\x004": 1.0, "q2\x005": 0.0}
    (tmp_path / "run" / "val" / "3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, rows[0]]))
    with pytest.raises(SystemExit) as error:
        vc.load(tmp_path / "run")
    assert str(error.value) == (
        f"{tmp_path / 'run'}: step 3's validation dump has 1 repeated prompt(s); rows cannot be paired "
        "(a validation set with the same prompts twice, such as VAL_ALSO's?)"
    )


def test_two_arms_with_two_seeds_are_paired_across_arms_and_seeds(tmp_path: Path, capsys) -> None:
    vc = load_script("val_compare")
    accs = {"a1": [1, 1, 0], "b1": [0, 1, 0], "a2": [1, 0, 1], "b2": [1, 0, 0]}
    for run, acc in accs.items():
        (tmp_path / run / "val").mkdir(parents=True)
        rows = [{"input": f"q{i}", "gts": "1", "acc": float(a)} for i, a in enumerate(acc)]
        (tmp_path / run / "val" / "10.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    vc.main(tmp_path, ["a=a1,a2", "b=b1,b2"])
    out = capsys.readouterr().out.split("\n\n")[-1].splitlines()
    assert out == [
        "a - b, last validations, seeds paired in the order given:",
        "  seed 1: a1 - b1: +0.3333 (s.e. 0.3333, n 3)",  # differences 1, 0, 0
        "  seed 2: a2 - b2: +0.3333 (s.e. 0.3333, n 3)",  # 0, 0, 1
        "  mean over 2 seed(s): +0.3333 (s.e. 0.1667, n 3)",  # per problem 0.5, 0, 0.5
    ]
    with (tmp_path / "val_arms.csv").open() as f:
        rows = [(r["pair"], r["verdicts"], float(r["difference"]), float(r["se"]), r["n"]) for r in csv.DictReader(f)]
    assert rows == [
        ("seed 1: a1 - b1", "recorded", pytest.approx(1 / 3, abs=1e-15), pytest.approx(1 / 3, abs=1e-15), "3"),
        ("seed 2: a2 - b2", "recorded", pytest.approx(1 / 3, abs=1e-15), pytest.approx(1 / 3, abs=1e-15), "3"),
        ("mean over 2 seed(s)", "recorded", pytest.approx(1 / 3, abs=1e-15), pytest.approx(1 / 6, abs=1e-15), "3"),
    ]
    assert (tmp_path / "val_arms.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit) as error:
        vc.main(tmp_path, ["a=a1,a2", "b=b1"])
    assert str(error.value) == (
        "arms: give two, with as many runs each (one a seed), as NAME=RUN,RUN; got {'a': ['a1', 'a2'], 'b': ['b1']}"
    )


def test_rescored_takes_the_current_rules_verdicts(tmp_path: Path, capsys) -> None:
    """Runs scored in training by the old last-number rule are compared by the reward's current rules."""
    vc = load_script("val_compare")

    def row(prompt: str, output: str, acc: float, reason: str = "final_answer") -> dict:
        return {"input": prompt, "output": output, "gts": "7", "acc": acc, "score": acc, f"term_{reason}": 1.0}

    old = [  # as the old rule scored them: the last number
        row("q0", "assistant\n#### 7\nThat is 7, not 8.", 0.0),  # current rules: the #### line, 7: right
        row(
            "q1", "assistant\n```python\nprint(7)\n```\n```output\n7\n```", 1.0
        ),  # a number only in an output block: no answer
        row("q2", "assistant\nso 7 and", 1.0, "response_budget"),  # cut off at the budget: no answer
    ]
    new = [
        row("q0", "assistant\n#### 7", 1.0),
        row("q1", "assistant\n#### 7", 1.0),
        row("q2", "assistant\n#### 3", 0.0),
    ]
    (tmp_path / "old" / "val").mkdir(parents=True)
    (tmp_path / "new" / "val").mkdir(parents=True)
    (tmp_path / "old" / "val" / "10.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    (tmp_path / "new" / "val" / "10.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    vc.main(tmp_path, ["old", "new"])
    assert capsys.readouterr().out.splitlines()[-1] == "old (step 10) - new (step 10): +0.0000 (s.e. 0.5774, n 3)"
    vc.main(tmp_path, ["--rescored", "old", "new"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "verdicts: rescored (the reward's current rules)"
    assert out[2].split() == ["old", "10", "3", "0.3333", "0.3333", "0.00", "0.333"]
    assert out[-1] == "old (step 10) - new (step 10): -0.3333 (s.e. 0.3333, n 3)"  # per problem 0, -1, 0
    with pytest.raises(SystemExit) as error:
        vc.main(tmp_path, ["--rescore", "old", "new"])
    assert str(error.value) == "unknown option(s) ['--rescore']; the only option is --rescored"
