"""scripts/rollout_dump_report.py: per-trajectory figures from verl's training-rollout dumps."""

from __future__ import annotations

import csv
import json
import lzma
from pathlib import Path

import pytest

from tests.scripts import load_script


def dump_row(uid: str, score: float) -> dict:
    # verl's trainer.rollout_data_dir rows: input, output, gts, score, step, uid (one row per segment)
    return {"input": "system ...", "output": "..." if not uid.startswith("pad") else "", "gts": 7, "score": score,
            "step": 3, "uid": uid}  # fmt: skip


def test_trajectories_are_grouped_from_segment_uids_and_padding_is_dropped(tmp_path: Path) -> None:
    report = load_script("rollout_dump_report")
    rows = (
        [dump_row(f"a_0_{i}", 1.0) for i in range(2)]  # right in 2 segments
        + [dump_row(f"a_1_{i}", 0.0) for i in range(12)]  # max_segments: 12 rows of 0
        + [dump_row("b_0_0", 1.0)]
        + [dump_row(f"b_1_{i}", 1.0) for i in range(3)]
        + [dump_row(f"pad9f_{k}_0", 0.0) for k in range(2)]  # verl's padding rows
    )
    row = report.step_row(3, rows)
    assert row == {
        "step": 3,
        "trajectories": 4,
        "scored": 3,
        "trajectory_score": 0.75,
        "row_score": round(6 / 18, 4),  # what critic/score/mean logs: the failure is 12 of 18 rows
        "rows": 18,
        "padding_rows": 2,
        "segments_mean": 4.5,
        "segments_max": 12,
        "scored_segments_mean": 2.0,
        "unscored_segments_mean": 12.0,
    }
    assert report.trajectory_key("abc-1_0_10") == ("abc-1_0", 10) and report.trajectory_key("plain") == ("plain", 0)


def test_main_reads_each_steps_dump_in_step_order_and_writes_the_csv(tmp_path: Path, capsys) -> None:
    report = load_script("rollout_dump_report")
    (tmp_path / "rollouts").mkdir()
    for step, score in ((10, 0.0), (2, 1.0)):
        text = "".join(json.dumps(dump_row(f"u{step}_0_{i}", score)) + "\n" for i in range(3))
        if step == 10:
            with lzma.open(tmp_path / "rollouts" / "10.jsonl.xz", "wt") as f:
                f.write(text)
        else:
            (tmp_path / "rollouts" / "2.jsonl").write_text(text)
    assert report.main([str(tmp_path)]) == 0
    with open(tmp_path / "rollout_steps.csv") as f:
        table = list(csv.DictReader(f))
    assert [(r["step"], r["trajectories"], r["scored"], r["segments_mean"]) for r in table] == [
        ("2", "1", "1", "3"),
        ("10", "1", "0", "3"),
    ]
    assert "wrote" in capsys.readouterr().out


def test_a_run_without_dumps_names_the_folder(tmp_path: Path) -> None:
    report = load_script("rollout_dump_report")
    with pytest.raises(SystemExit) as exc:
        report.main([str(tmp_path)])
    assert (
        str(exc.value) == f"{tmp_path / 'rollouts'}: no <step>.jsonl(.gz|.xz) files (verl's trainer.rollout_data_dir)"
    )
