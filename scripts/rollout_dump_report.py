"""Per-trajectory figures of a training run, from verl's training-rollout dumps (``trainer.rollout_data_dir``).

    python scripts/rollout_dump_report.py docs/results/ledger-grpo30-h200/fold_grpo

verl's ``critic/score/mean`` is a mean over ROWS. A folded trajectory is one row per segment, each with the
trajectory's reward, so a run whose failures are its longest trajectories (a ``max_segments`` end is 12 rows)
logs a score far below its share of right trajectories. This reads ``RUN/rollouts/<step>.jsonl`` (or ``.jsonl.gz``
/ ``.jsonl.xz``: verl's dump, one row per segment with ``uid`` = ``{sample}_{session}_{segment}``), drops verl's
padding rows (``uid`` starting with ``pad``), groups the rest into trajectories, and writes
``RUN/rollout_steps.csv``: per step, the trajectories, how many scored, their mean score (per trajectory: each
one's last segment) beside the per-row mean verl logs, and segments per trajectory.
"""

from __future__ import annotations

import csv
import gzip
import json
import lzma
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

FIELDS = ["step", "trajectories", "scored", "trajectory_score", "row_score", "rows", "padding_rows",
          "segments_mean", "segments_max", "scored_segments_mean", "unscored_segments_mean"]  # fmt: skip


def read_dump(path: Path) -> list[dict[str, Any]]:
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def dump_files(run: Path) -> dict[int, Path]:
    """``{step: file}`` of ``run/rollouts``; a step's name is its number (``12.jsonl``, ``12.jsonl.xz``)."""
    files = {}
    for file in (run / "rollouts").glob("*.jsonl*"):
        step = file.name.split(".", 1)[0]
        if step.isdigit():
            files[int(step)] = file
    if not files:
        raise SystemExit(f"{run / 'rollouts'}: no <step>.jsonl(.gz|.xz) files (verl's trainer.rollout_data_dir)")
    return dict(sorted(files.items()))


def trajectory_key(uid: str) -> tuple[str, int]:
    """``{sample}_{session}_{segment}`` -> (``{sample}_{session}``, segment); any other uid is one trajectory."""
    head, _, last = uid.rpartition("_")
    return (head, int(last)) if head and last.isdigit() else (uid, 0)


def read_trajectories(path: Path) -> list[list[dict[str, Any]]]:
    """A dump's rows grouped into trajectories (``trajectory_key``), each in segment order; verl's padding rows
    (``uid`` ``pad...``) left out. Also reads validation dumps (``trainer.validation_data_dir``): same rows."""
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for row in read_dump(path):
        if not str(row["uid"]).startswith("pad"):
            key, index = trajectory_key(str(row["uid"]))
            groups[key].append((index, row))
    return [[row for _, row in sorted(segs, key=lambda s: s[0])] for segs in groups.values()]


def step_row(step: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    real = [r for r in rows if not str(r["uid"]).startswith("pad")]
    segments: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in real:
        key, index = trajectory_key(str(row["uid"]))
        segments[key].append((index, float(row["score"])))
    finals = {key: max(segs)[1] for key, segs in segments.items()}  # the last segment's score
    counts = {key: len(segs) for key, segs in segments.items()}
    scored = [key for key, score in finals.items() if score > 0]
    unscored = [key for key, score in finals.items() if score <= 0]
    return {
        "step": step,
        "trajectories": len(finals),
        "scored": len(scored),
        "trajectory_score": round(mean(finals.values()), 4) if finals else "",
        "row_score": round(mean(float(r["score"]) for r in real), 4) if real else "",
        "rows": len(real),
        "padding_rows": len(rows) - len(real),
        "segments_mean": round(mean(counts.values()), 3) if counts else "",
        "segments_max": max(counts.values(), default=0),
        "scored_segments_mean": round(mean(counts[k] for k in scored), 3) if scored else "",
        "unscored_segments_mean": round(mean(counts[k] for k in unscored), 3) if unscored else "",
    }


def write_csv(path: Path, rows: list[dict[str, Any]], fields: list[str] | None = None) -> None:
    """``rows`` as a CSV with a header: ``fields``, or the first row's keys."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields or list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    run = Path(argv[0])
    table = [step_row(step, read_dump(file)) for step, file in dump_files(run).items()]
    out = run / "rollout_steps.csv"
    write_csv(out, table, FIELDS)
    for row in table:
        print(", ".join(f"{k} {row[k]}" for k in FIELDS))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
