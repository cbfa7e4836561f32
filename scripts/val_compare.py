"""Held-out accuracy of training runs from verl's validation dumps, with paired differences.

    python scripts/val_compare.py docs/results/turn-credit-ab-h100 grpo_s1 grpo_s2 turn_grpo_s2

Reads ``RESULTS/RUN/val/<step>.jsonl`` (``trainer.validation_data_dir``; or the same files inside
``RESULTS/RUN/val.tar.gz``) and prints, per run and validation step, the problems, accuracy, its standard
error, executed calls per trajectory and the fraction that ran out of budget; then, for every pair of
runs, the paired difference of their last validations on the problems both saw (by prompt text), with
its standard error (std of the per-problem differences / sqrt(n)). Writes ``RESULTS/val_summary.csv``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import tarfile
from itertools import combinations
from pathlib import Path


def load(run: Path) -> dict[int, dict[str, dict]]:
    """step -> {prompt text + ground truth: the dump's row}."""
    texts: dict[int, str] = {}
    if (run / "val").is_dir():
        texts = {int(p.stem): p.read_text() for p in (run / "val").glob("*.jsonl")}
    elif (run / "val.tar.gz").exists():
        with tarfile.open(run / "val.tar.gz") as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".jsonl"):
                    texts[int(Path(member.name).stem)] = tar.extractfile(member).read().decode()
    steps = {}
    for step in sorted(texts):
        rows = [json.loads(line) for line in texts[step].splitlines() if line.strip()]
        steps[step] = {row["input"] + "\0" + str(row["gts"]): row for row in rows}
        if len(steps[step]) < len(rows):  # e.g. VAL_ALSO: the same prompts through two loops, which the dump
            raise SystemExit(  # does not tell apart
                f"{run}: step {step}'s validation dump has {len(rows) - len(steps[step])} repeated prompt(s); "
                "rows cannot be paired (a validation set with the same prompts twice, such as VAL_ALSO's?)"
            )
    return steps


def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def main(results: Path, names: list[str]) -> None:
    runs = {name: load(results / name) for name in names}
    table = []
    print(f"{'run':<16}{'step':>5}{'n':>6}{'acc':>8}{'s.e.':>7}{'exec/traj':>10}{'budget':>8}")
    for name, steps in runs.items():
        for step, rows in steps.items():
            acc, se = mean_se([float(r["acc"]) for r in rows.values()])
            executed = sum(float(r.get("num_executed_calls", 0)) for r in rows.values()) / len(rows)
            budget = sum(float(r.get("term_response_budget", 0)) for r in rows.values()) / len(rows)
            table.append({"run": name, "step": step, "n": len(rows), "acc": acc, "se": se,
                          "executed_per_traj": executed, "response_budget": budget})  # fmt: skip
            print(f"{name:<16}{step:>5}{len(rows):>6}{acc:>8.4f}{se:>7.4f}{executed:>10.2f}{budget:>8.3f}")
    print("\npaired differences of the last validations (row run minus column run)")
    for a, b in combinations(names, 2):
        last_a, last_b = runs[a][max(runs[a])], runs[b][max(runs[b])]
        common = sorted(set(last_a) & set(last_b))
        if not common:
            continue
        diff, se = mean_se([float(last_a[k]["acc"]) - float(last_b[k]["acc"]) for k in common])
        print(f"{a} (step {max(runs[a])}) - {b} (step {max(runs[b])}): {diff:+.4f} (s.e. {se:.4f}, n {len(common)})")
    with (results / "val_summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:])
