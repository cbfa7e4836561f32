"""experiments/gsm8k_learn/ab_report.py: the tools A/B report, exact figures on a synthetic 2 arms x 2 seeds folder
and the recorded figures of the committed one-seed result (docs/results/gsm8k-tools-ab-h100)."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest

from tests.scripts import ROOT, load_script, write_val_dumps

GSM8K_DIR = Path(os.environ.get("LONGFLOW_GSM8K_DIR", ROOT.parent / "shared" / "data" / "gsm8k"))
pytestmark = pytest.mark.skipif(
    not (GSM8K_DIR / "test.jsonl").is_file(), reason="GSM8K not found (set LONGFLOW_GSM8K_DIR)"
)
report = load_script("ab_report", "experiments/gsm8k_learn")
SYSTEM = "system\nYou are a careful math assistant. Solve the user's problem step by step.\n"
TERMS = ("error", "final_answer", "interaction_done", "max_assistant_turns", "prompt_too_long", "response_budget")
REAL = ROOT / "docs" / "results" / "gsm8k-tools-ab-h100"


def gsm8k_rows() -> list[tuple[str, str]]:
    """(question, ground truth) of GSM8K test problems 0-3 (ground truths 18, 3, 70000, 540)."""
    rows = [json.loads(line) for line in (GSM8K_DIR / "test.jsonl").read_text().splitlines()[:4]]
    return [(row["question"], row["answer"].rsplit("####", 1)[1].strip()) for row in rows]


def row(problem: int, output: str, acc: float, *, tools: bool, budget: bool = False, calls: tuple = (0, 0)) -> dict:
    """A validation dump row as verl writes it (the real rows' keys); no_tools rows have no termination fields."""
    question, truth = gsm8k_rows()[problem]
    reason = ("response_budget" if budget else "final_answer") if tools else ""
    return {
        "input": f"{SYSTEM}user\n{question}\nassistant\n", "output": output, "gts": truth, "score": acc,
        "step": 0, "reward": acc, "acc": acc, "outcome": acc, "answer_found": 1.0,
        "num_tool_calls": float(calls[0]), "num_executed_calls": float(calls[0]), "num_successful_calls": float(calls[1]),
        "is_response_budget": float(reason == "response_budget"), "num_assistant_turns": float(tools),
        **{f"term_{t}": float(t == reason) for t in TERMS}, "uid": f"u{problem}-{len(output)}_0_0",
    }  # fmt: skip


def right(t: str) -> str:
    return f"So the answer is {t}.\n#### {t}"


WRONG = "So the answer is 7.\n#### 7"


def runs_spec() -> dict[str, dict[int, list[dict]]]:
    """Per run and validation step, its rows. R: rescored, O: recorded verdict, per problem 0-3."""
    t = [truth for _, truth in gsm8k_rows()]
    boxed = "So \\boxed{3} dollars, at 2 an hour"  # recorded 0 (the old rule read 2), rescored 1
    code = "```python\nprint(70000)\n```\n```output\n70000\n```\nDone."  # recorded 1, rescored 0 (no number in prose)
    long_reply = "Let me think. " * 400 + "#### 70000"  # >= 1520 tokens: cut off at the 1536 budget, recorded 1
    medium = "Let me think. " * 20 + "#### 540"  # >= 48 tokens: cut off at no_tools_s2's budget of 64, recorded 1
    tools, plain = {"tools": True}, {"tools": False}
    return {
        "tools_s1": {  # s0 R 1000 O 1010; s10 R 1110 O 1011, problem 3 cut off
            0: [row(0, right(t[0]), 1, calls=(1, 1), **tools), row(1, WRONG, 0, **tools),
                row(2, code, 1, calls=(1, 1), **tools), row(3, WRONG, 0, calls=(2, 1), **tools)],
            10: [row(0, right(t[0]), 1, calls=(2, 2), **tools), row(1, boxed, 0, calls=(1, 1), **tools),
                 row(2, right(t[2]), 1, calls=(1, 0), **tools), row(3, right(t[3]), 1, calls=(2, 2), budget=True, **tools)],
        },
        "tools_s2": {  # problem 3 not validated; s0 R=O 010, s10 R=O 110, problem 2 cut off
            0: [row(0, WRONG, 0, **tools), row(1, right(t[1]), 1, calls=(1, 1), **tools), row(2, WRONG, 0, calls=(1, 0), **tools)],
            10: [row(0, right(t[0]), 1, calls=(1, 1), **tools), row(1, right(t[1]), 1, calls=(2, 2), **tools),
                 row(2, WRONG, 0, calls=(3, 2), budget=True, **tools)],
        },
        "no_tools_s1": {  # s0 R=O 1001; s10 R 1100 O 1110
            0: [row(0, right(t[0]), 1, **plain), row(1, WRONG, 0, **plain), row(2, WRONG, 0, **plain), row(3, right(t[3]), 1, **plain)],
            10: [row(0, right(t[0]), 1, **plain), row(1, right(t[1]), 1, **plain), row(2, long_reply, 1, **plain), row(3, WRONG, 0, **plain)],
        },
        "no_tools_s2": {  # s0 R=O 0110; s10 R 1110 O 1111
            0: [row(0, WRONG, 0, **plain), row(1, right(t[1]), 1, **plain), row(2, right(t[2]), 1, **plain), row(3, WRONG, 0, **plain)],
            10: [row(0, right(t[0]), 1, **plain), row(1, right(t[1]), 1, **plain), row(2, right(t[2]), 1, **plain), row(3, medium, 1, **plain)],
        },
    }  # fmt: skip


def metrics(name: str) -> list[dict]:
    """verl's file logger lines: validation at step 0, steps 1 and 2, step 2's validation on a line of its own."""
    val = {"val-core/longflow/gsm8k/acc/mean@1": 0.25}
    train = {"critic/score/mean": 0.5, "response_length/mean": 300.0, "response_length/clip_ratio": 0.125,
             "timing_s/step": 10.0, "timing_s/gen": 4.0}  # fmt: skip
    if name.startswith("tools"):
        train |= {"longflow/tool_calls/mean": 1.5, "longflow/executed_calls/mean": 1.25,
                  "longflow/termination/response_budget": 0.0625}  # fmt: skip
    return [{"step": 0, "data": val}, {"step": 1, "data": train}, {"step": 2, "data": {**train, "timing_s/step": 9.5}},
            {"step": 2, "data": {**val, "val-core/longflow/gsm8k/acc/mean@1": 0.75}}]  # fmt: skip


def write_run(results: Path, name: str, dumps: dict[int, list[dict]] | None, command: str = "") -> Path:
    run = results / name
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics(name)))
    (run / "command.txt").write_text(f"python3 -m verl.trainer.main_ppo {command}\n")
    (run / "rc").write_text("0\n")
    if dumps is not None:
        write_val_dumps(run, dumps)
    return run


def synthetic(tmp_path: Path) -> Path:
    results = tmp_path / "ab"
    for name, dumps in runs_spec().items():
        write_run(results, name, dumps, "data.max_response_length=64" if name == "no_tools_s2" else "data.seed=1")
    return results


def test_synthetic_two_arms_two_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = synthetic(tmp_path)
    assert report.main([str(results), "--gsm8k", str(GSM8K_DIR / "test.jsonl")]) == 0
    text = (results / "summary.md").read_text()
    assert text in capsys.readouterr().out
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[1:6] == [
        "| tools_s1 (steps 0->10, rc 0) | 4 | 0.2500 (1/4) | 0.5000 (2/4) | 0.7500 (3/4) | 0.7500 (3/4) | +0.5000 "
        "(0.2887) | +0.2500 (0.2500) | 0.0 % -> 25.0 % | 1.00 -> 1.50 | 75.0 % -> 83.3 % |",
        "| tools_s2 (steps 0->10, rc 0) | 3 | 0.3333 (1/3) | 0.3333 (1/3) | 0.6667 (2/3) | 0.6667 (2/3) | +0.3333 "
        "(0.3333) | +0.3333 (0.3333) | 0.0 % -> 33.3 % | 0.67 -> 2.00 | 50.0 % -> 83.3 % |",
        # the change over seeds: per problem (0-2, which both validated) averaged over the seeds
        "| **tools mean** (2 seeds) | 3 | 0.2917 | 0.4167 | 0.7083 | 0.7083 | +0.5000 (0.0000) | +0.1667 (0.1667) | "
        "0.0 % -> 29.2 % | 0.83 -> 1.75 | 62.5 % -> 83.3 % |",
        "| no_tools_s1 (steps 0->10, rc 0) | 4 | 0.5000 (2/4) | 0.5000 (2/4) | 0.5000 (2/4) | 0.7500 (3/4) | +0.0000 "
        "(0.4082) | +0.2500 (0.4787) | 0.0 % -> 25.0 % | 0.00 -> 0.00 | - -> - |",
        "| no_tools_s2 (steps 0->10, rc 0) | 4 | 0.5000 (2/4) | 0.5000 (2/4) | 0.7500 (3/4) | 1.0000 (4/4) | +0.2500 "
        "(0.2500) | +0.5000 (0.2887) | 0.0 % -> 25.0 % | 0.00 -> 0.00 | - -> - |",
    ]
    assert table[6] == (
        "| **no_tools mean** (2 seeds) | 4 | 0.5000 | 0.5000 | 0.6250 | 0.8750 | +0.1250 (0.2394) | +0.3750 (0.1250) | "
        "0.0 % -> 25.0 % | 0.00 -> 0.00 | - -> - |"
    )
    assert table[8:] == [
        "| 1 | before (step 0) | 4 | -0.2500 (0.2500) | +0.0000 (0.4082) |",
        "| 2 | before (step 0) | 3 | -0.3333 (0.3333) | -0.3333 (0.3333) |",
        "| **mean of 2 seeds** | before | 3 | -0.1667 (0.1667) | +0.0000 (0.0000) |",
        "| 1 | after (step 10) | 4 | +0.2500 (0.2500) | +0.0000 (0.4082) |",
        "| 2 | after (step 10) | 3 | -0.3333 (0.3333) | -0.3333 (0.3333) |",
        "| **mean of 2 seeds** | after | 3 | +0.0000 (0.0000) | -0.3333 (0.1667) |",
    ]
    assert "budget: tools_s1 1536, no_tools_s1 1536, tools_s2 1536, no_tools_s2 64" in text
    assert "each problem's difference over the seeds" in text
    assert text.split("## Goals (tools arm, last validation; means over seeds)\n\n")[1].splitlines() == [
        "- tools >= no_tools + 5 points after training (mean over seeds, paired, rescored): 0.0 points, "
        "**not reached** (5.0 points short); as recorded -33.3 points",
        "- <= 5 % of held-out tools trajectories end at the response budget: 29.2 %, **not reached** (24.2 points over)",
        "- >= 1 executed call per held-out tools trajectory: 1.75, **reached** (0.75 above)",
        "- >= 80 % of the executed calls clean (successful / executed): 83.3 %, **reached** (3.3 points above)",
    ]
    with (results / "steps.csv").open() as handle:
        steps = list(csv.DictReader(handle))
    assert list(steps[0]) == ["step", "run", "arm", "seed", *report.STEP_KEYS]
    assert "longflow/executed_calls/mean" in steps[0] and "longflow/termination/response_budget" in steps[0]
    assert [(s["run"], s["step"]) for s in steps] == [(n, str(i)) for n in ("tools_s1", "no_tools_s1", "tools_s2",
                                                                          "no_tools_s2") for i in range(3)]  # fmt: skip
    assert steps[0] == {k: "" for k in report.STEP_KEYS} | {
        "step": "0", "run": "tools_s1", "arm": "tools", "seed": "1", "val-core/longflow/gsm8k/acc/mean@1": "0.25"}  # fmt: skip
    assert steps[2]["timing_s/step"] == "9.5" and steps[2]["val-core/longflow/gsm8k/acc/mean@1"] == "0.75"
    assert steps[1]["longflow/executed_calls/mean"] == "1.25" and steps[1]["longflow/successful_calls/mean"] == ""
    assert steps[4] == {k: "" for k in report.STEP_KEYS} | {
        "step": "1", "run": "no_tools_s1", "arm": "no_tools", "seed": "1", "critic/score/mean": "0.5",
        "response_length/mean": "300.0", "response_length/clip_ratio": "0.125", "timing_s/step": "10.0",
        "timing_s/gen": "4.0"}  # fmt: skip
    assert (results / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_option_and_missing_files(tmp_path: Path) -> None:
    results = synthetic(tmp_path)
    gsm8k = ["--gsm8k", str(GSM8K_DIR / "test.jsonl")]
    assert report.main([str(results), "--runs", "tools_s1", "no_tools_s1", *gsm8k]) == 0
    assert "# Tools A/B: tools_s1, no_tools_s1\n" in (results / "summary.md").read_text()
    write_run(results, "tools_s3", None)
    with pytest.raises(SystemExit) as error:
        report.main([str(results), *gsm8k])
    assert str(error.value) == f"{results / 'tools_s3'}: no val.tar.gz (the run's validation dump)"
    with pytest.raises(SystemExit) as error:
        report.main([str(results), "--runs", "tools_s9", *gsm8k])
    assert str(error.value) == f"{results / 'tools_s9'}: no such run folder"
    (results / "tools_s1" / "metrics.jsonl").unlink()
    with pytest.raises(SystemExit) as error:
        report.main([str(results), "--runs", "tools_s1", *gsm8k])
    assert str(error.value) == f"{results / 'tools_s1'}: no metrics.jsonl (the run's training log)"


@pytest.mark.skipif(not (REAL / "tools" / "val.tar.gz").is_file(), reason="the committed A/B result is not here")
def test_committed_one_seed_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed A/B (one seed, steps 0 and 40) in the <arm>_s1 layout: the figures its README gives."""
    for arm in ("tools", "no_tools"):
        (tmp_path / f"{arm}_s1").mkdir()
        for path in (REAL / arm).iterdir():
            (tmp_path / f"{arm}_s1" / path.name).symlink_to(path)
    monkeypatch.setenv("LONGFLOW_GSM8K_DIR", str(GSM8K_DIR))
    assert report.main([str(tmp_path)]) == 0
    table = [line.split(" | ") for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| ")]
    tools, plain = table[1], table[3]
    assert tools[0] == "| tools_s1 (steps 0->40, rc 0)" and tools[1] == "1318"
    assert (tools[3], tools[5], tools[7]) == ("0.2785 (367/1318)", "0.2982 (393/1318)", "+0.0197 (0.0129)")
    assert tools[8:] == ["3.9 % -> 26.0 %", "0.29 -> 1.83", "80.0 % -> 89.2 % |"]
    assert (plain[3], plain[5], plain[7]) == ("0.2373 (313/1319)", "0.3169 (418/1319)", "+0.0796 (0.0132)")
    for cells in (tools, plain):  # rescored with the current rules: its own counts of the same problems
        assert all(re.fullmatch(rf"0\.\d{{4}} \(\d+/{cells[1]}\)", cells[i]) for i in (2, 4)), cells
    before, after = table[6], table[8]
    assert before[:3] == ["| 1", "before (step 0)", "1318"] and before[4] == "+0.0410 (0.0109) |"
    assert after[:3] == ["| 1", "after (step 40)", "1318"] and after[4] == "-0.0190 (0.0129) |"
    with (tmp_path / "steps.csv").open() as handle:
        steps = list(csv.DictReader(handle))
    assert len(steps) == 82 and steps[40]["val-core/longflow/gsm8k/acc/mean@1"] == "0.29817905918057663"
