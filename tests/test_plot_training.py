"""scripts/plot_training.py: per-step rows from verl's file logger (the CSV half; the PNG needs matplotlib)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import ModuleType

from tests.scripts import ROOT, load_script


def load() -> ModuleType:
    return load_script("plot_training")


def test_steps_merge_lines_of_one_step_and_leave_missing_metrics_empty(tmp_path: Path) -> None:
    pt = load()
    lines = [
        {"step": 0, "data": {pt.VAL_ACC: 0.25}},
        {"step": 1, "data": {"critic/score/mean": 0.5, "longflow/tool_calls/mean": 1.5}},
        {"step": 1, "data": {"timing_s/step": 60.0}},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = pt.read_steps(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["val_acc"], r["score"], r["tool_calls"], r["step_s"]) for r in rows] == [
        (0, 0.25, None, None, None),
        (1, None, 0.5, 1.5, 60.0),
    ]
    pt.write_csv(rows, tmp_path / "steps.csv")
    with (tmp_path / "steps.csv").open() as f:
        table = list(csv.DictReader(f))
    assert table[1]["score"] == "0.5" and table[0]["score"] == "" and list(table[0])[:3] == ["step", "score", "val_acc"]


def test_the_committed_runs_csv_matches_their_metrics() -> None:
    pt = load()
    results = ROOT / "docs" / "results" / "gsm8k-learn-v1-h100"
    for run in ("grpo", "turn_grpo"):
        rows = pt.read_steps(results / run / "metrics.jsonl")
        with (results / run / "steps.csv").open() as f:
            table = list(csv.DictReader(f))
        assert [float(r["val_acc"]) for r in table if r["val_acc"]] == [r["val_acc"] for r in rows if r["val_acc"]]
        assert len(table) == 13 and float(table[-1]["val_acc"]) == 0.2734375


def test_another_tasks_held_out_accuracy_fills_val_acc(tmp_path: Path) -> None:
    pt = load()
    lines = [
        {  # VAL_ALSO's baseline comes first here: it is not the run's accuracy
            "step": 0,
            "data": {
                "val-core/longflow/ledger@truncated/acc/mean@1": 0.5,
                "val-core/longflow/ledger/acc/mean@1": 0.0078125,
            },
        },
        {
            "step": 1,
            "data": {
                "critic/score/mean": 0.0,
                "longflow/segments/mean": 1.875,
                "longflow/termination/max_segments": 0.25,
                "actor/ppo_kl": 0.0111,
            },
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = pt.read_steps(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["val_acc"], r["score"], r["segments"], r["max_segments"], r["ppo_kl"]) for r in rows] == [
        (0, 0.0078125, None, None, None, None),
        (1, None, 0.0, 1.875, 0.25, 0.0111),
    ]


def test_the_dump_reports_per_trajectory_score_is_read_by_step(tmp_path: Path) -> None:
    pt = load()
    (tmp_path / "rollout_steps.csv").write_text(
        "step,trajectories,scored,trajectory_score,row_score\n1,32,32,1.0,1.0\n12,32,27,0.8438,0.7719\n2,0,0,,\n"
    )
    assert pt.read_trajectory_scores(tmp_path / "rollout_steps.csv") == [(1, 1.0), (12, 0.8438)]
