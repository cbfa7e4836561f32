"""Held-out accuracy of training runs from verl's validation dumps, with paired differences.

    python scripts/val_compare.py docs/results/turn-credit-ab-h100 grpo_s1 grpo_s2 turn_grpo_s2
    python scripts/val_compare.py docs/results/long-tail-scaling-h200x4 sync=sync_x1,sync_x1_s2 colo=colo_x1,colo_x1_s2
    python scripts/val_compare.py docs/results/long-tail-scaling-h200x4 --rescored sync=sync_x1,sync_x1_s2 colo=...

Reads ``RESULTS/RUN/val/<step>.jsonl`` (``trainer.validation_data_dir``; or the same files inside
``RESULTS/RUN/val.tar.gz``) and prints, per run and validation step, the problems, accuracy, its standard
error, executed calls per trajectory and the fraction that ran out of budget; then, for every pair of
runs, the paired difference of their last validations on the problems both saw (by prompt text), with
its standard error (std of the per-problem differences / sqrt(n)). Writes ``RESULTS/val_summary.csv``.

Two arms given as ``NAME=RUN,RUN,...`` (the same number of runs, one a seed, paired in the order given) add the
arms' difference: per seed, and over seeds, where each problem's difference is the mean over seeds of its per-seed
differences (problems every run validated), so the standard error is paired across arms and seeds alike, and write
them to ``RESULTS/val_arms.csv`` and ``RESULTS/val_arms.png`` (each seed's difference and the mean, in points, with
one standard error each side).

``--rescored``: every row's ``acc`` is the reward's current answer rules applied to its dumped text
(``experiments/rescore/rescore.py``), for runs whose trainer scored with older rules; the pack must be importable.
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


def arm_rows(runs: dict[str, dict[int, dict[str, dict]]], arms: dict[str, list[str]]) -> list[dict]:
    """The two arms' paired difference of their last validations: a row a seed, then one over seeds."""
    (a, a_runs), (b, b_runs) = arms.items()
    last = {name: steps[max(steps)] for name, steps in runs.items()}
    common = sorted(set.intersection(*(set(last[name]) for name in a_runs + b_runs)))
    rows, per_problem = [], []
    for seed, (ra, rb) in enumerate(zip(a_runs, b_runs, strict=True), start=1):
        diffs = [float(last[ra][k]["acc"]) - float(last[rb][k]["acc"]) for k in common]
        per_problem.append(diffs)
        diff, se = mean_se(diffs)
        rows.append({"pair": f"seed {seed}: {ra} - {rb}", "difference": diff, "se": se, "n": len(common)})
    diff, se = mean_se([sum(d) / len(d) for d in zip(*per_problem, strict=True)])
    rows.append({"pair": f"mean over {len(a_runs)} seed(s)", "difference": diff, "se": se, "n": len(common)})
    return rows


def arm_difference(arms: dict[str, list[str]], rows: list[dict]) -> list[str]:
    """Lines of the two arms' paired difference (``arm_rows``): per seed, then over seeds."""
    a, b = arms
    lines = [f"{a} - {b}, last validations, seeds paired in the order given:"]
    for row in rows:
        lines.append(f"  {row['pair']}: {row['difference']:+.4f} (s.e. {row['se']:.4f}, n {row['n']})")
    return lines


def plot_arms(rows: list[dict], arms: dict[str, list[str]], verdicts: str, path: Path) -> None:
    """Each seed's paired difference and the mean over seeds, in points, with one standard error each side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = arms
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows, strict=True):
        mean = row is rows[-1]
        ax.errorbar(100 * row["difference"], y, xerr=100 * row["se"], fmt="D" if mean else "o", capsize=4,
                    color="black" if mean else "tab:blue")  # fmt: skip
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(ys, [row["pair"] for row in rows])
    ax.set_xlabel(f"held-out accuracy, points ({verdicts}), ± one paired standard error")
    ax.set_title(f"{a} - {b}: paired differences of the last validations")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_arms(args: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Run names and ``NAME=RUN,RUN`` arms (none, or two with as many runs each) from the command line."""
    arms = {arg.split("=", 1)[0]: arg.split("=", 1)[1].split(",") for arg in args if "=" in arg}
    if arms and (len(arms) != 2 or len({len(r) for r in arms.values()}) != 1):
        raise SystemExit(f"arms: give two, with as many runs each (one a seed), as NAME=RUN,RUN; got {arms}")
    names = [arg for arg in args if "=" not in arg]
    return list(dict.fromkeys(names + [run for runs in arms.values() for run in runs])), arms


VERDICTS = {"rescored": "the reward's current rules", "recorded": "the dumps' acc"}


def rescored(runs: dict[str, dict[int, dict[str, dict]]]) -> None:
    """Every row's ``acc`` replaced by the current rules' verdict on its dumped text."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.rescore.rescore import current_acc

    for steps in runs.values():
        for rows in steps.values():
            for row in rows.values():
                row["acc"] = current_acc(row)


def main(results: Path, args: list[str]) -> None:
    unknown = [arg for arg in args if arg.startswith("-") and arg != "--rescored"]
    if unknown:
        raise SystemExit(f"unknown option(s) {unknown}; the only option is --rescored")
    names, arms = parse_arms([arg for arg in args if arg != "--rescored"])
    runs = {name: load(results / name) for name in names}
    verdicts = "rescored" if "--rescored" in args else "recorded"
    if verdicts == "rescored":
        rescored(runs)
    print(f"verdicts: {verdicts} ({VERDICTS[verdicts]})")
    table = []
    print(f"{'run':<16}{'step':>5}{'n':>6}{'acc':>8}{'s.e.':>7}{'exec/traj':>10}{'budget':>8}")
    for name, steps in runs.items():
        for step, rows in steps.items():
            acc, se = mean_se([float(r["acc"]) for r in rows.values()])
            executed = sum(float(r.get("num_executed_calls", 0)) for r in rows.values()) / len(rows)
            budget = sum(float(r.get("term_response_budget", 0)) for r in rows.values()) / len(rows)
            table.append({"run": name, "step": step, "verdicts": verdicts, "n": len(rows), "acc": acc, "se": se,
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
    if arms:
        rows = arm_rows(runs, arms)
        print("\n" + "\n".join(arm_difference(arms, rows)))
        with (results / "val_arms.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["pair", "verdicts", "difference", "se", "n"])
            writer.writeheader()
            writer.writerows({**row, "verdicts": verdicts} for row in rows)
        plot_arms(rows, arms, verdicts, results / "val_arms.png")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:])
