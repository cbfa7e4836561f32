"""Per-step CSV and PNG plots of verl training runs, from verl's file logger (``metrics.jsonl``).

    python scripts/plot_training.py docs/results/gsm8k-learn-v1-h100 grpo turn_grpo

For each run ``RESULTS/RUN/metrics.jsonl`` (written by ``VERL_FILE_LOGGER_PATH``; ``scripts/gpu/train_bg.sh``
sets it) this writes ``RESULTS/RUN/steps.csv`` (one row per step, the columns below) and, over all runs,
``RESULTS/training.png`` (training score, held-out accuracy, turns and tool use per step). Needs matplotlib
(``pip install -e '.[plots]'``). verl's training score is a mean over rows, and a folded trajectory is one row per
segment: where ``RESULTS/RUN/rollout_steps.csv`` exists (``scripts/rollout_dump_report.py``), its per-trajectory
score is drawn beside it, dashed.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

VAL_ACC = "val-core/longflow/gsm8k/acc/mean@1"
COLUMNS = {
    "score": "critic/score/mean",
    "val_acc": VAL_ACC,
    "response_length": "response_length/mean",
    "num_turns": "num_turns/mean",
    "assistant_turns": "longflow/assistant_turns/mean",
    "tool_calls": "longflow/tool_calls/mean",
    "tool_errors": "longflow/tool_errors/mean",
    "malformed_calls": "longflow/malformed_calls/mean",
    "user_turns": "longflow/user_turns/mean",
    "interaction_done": "longflow/termination/interaction_done",
    "response_budget": "longflow/termination/response_budget",
    "entropy": "actor/entropy",
    "step_s": "timing_s/step",
    "gen_s": "timing_s/gen",
    "update_actor_s": "timing_s/update_actor",
    "executed_calls": "longflow/executed_calls/mean",
    "successful_calls": "longflow/successful_calls/mean",
    "execution_success_rate": "longflow/execution_success_rate",
    "invented_outputs": "longflow/invented_outputs/mean",
    "budget_ended": "longflow/termination/response_budget",
    "val_executed_calls": "val-aux/longflow/gsm8k/num_executed_calls/mean@1",
    "val_successful_calls": "val-aux/longflow/gsm8k/num_successful_calls/mean@1",
    "val_response_budget": "val-aux/longflow/gsm8k/term_response_budget/mean@1",
    "segments": "longflow/segments/mean",
    "max_segments": "longflow/termination/max_segments",
    "grad_norm": "actor/grad_norm",
    "ppo_kl": "actor/ppo_kl",  # rollout log-probs vs the trainer's (bypass mode): the engine-trainer mismatch
    "rollout_probs_diff_mean": "training/rollout_probs_diff_mean",  # the same, measured (bypass_mode=false only)
    "rollout_probs_diff_max": "training/rollout_probs_diff_max",
    "rollout_corr_kl": "rollout_corr/kl",  # verl's rollout-correction metrics (bypass_mode=false only)
    "rollout_corr_log_ppl_diff_max": "rollout_corr/log_ppl_diff_max",  # the most diverging trajectory's
    "actor_optimizer_steps": "longflow/actor_optimizer_steps",  # per training step (rows, not trajectories)
}
VAL_ACC_ANY = re.compile(r"val-core/longflow/[^/@]+/acc/mean@1")  # another task's held-out accuracy (the ledger's);
# not a labelled source's (longflow/ledger@truncated: a baseline in the same validation, experiments/ledger_folding)


def read_steps(path: Path) -> list[dict[str, float | None]]:
    """One dict per step (``COLUMNS`` keys, None where the step has no such metric)."""
    steps: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        data = row["data"]
        other = [v for k, v in data.items() if VAL_ACC_ANY.fullmatch(k)]
        if VAL_ACC not in data and other:
            data = {**data, VAL_ACC: other[0]}
        steps.setdefault(int(row["step"]), {}).update(data)
    return [{"step": s, **{c: steps[s].get(k) for c, k in COLUMNS.items()}} for s in sorted(steps)]


def write_csv(rows: list[dict[str, float | None]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", *COLUMNS])
        writer.writeheader()
        writer.writerows(rows)


def read_trajectory_scores(path: Path) -> list[tuple[int, float]]:
    """(step, per-trajectory score) from ``scripts/rollout_dump_report.py``'s ``rollout_steps.csv``."""
    with path.open() as f:
        return [(int(r["step"]), float(r["trajectory_score"])) for r in csv.DictReader(f) if r["trajectory_score"]]


def plot(
    runs: dict[str, list[dict[str, float | None]]],
    path: Path,
    per_trajectory: dict[str, list[tuple[int, float]]] | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("score", "training score (mean over rows: a row per segment)"),
        ("val_acc", "held-out accuracy (greedy)"),
        ("tool_calls", "tool calls per trajectory"),
        ("assistant_turns", "assistant turns per trajectory"),
        ("response_length", "response tokens per trajectory"),
        ("step_s", "seconds per step"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(15, 7))
    for ax, (column, title) in zip(axes.flat, panels, strict=True):
        for i, (name, rows) in enumerate(runs.items()):
            color = f"C{i}"  # a run keeps its colour in every panel, its per-trajectory score included
            points = [(r["step"], r[column]) for r in rows if r[column] is not None]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", markersize=3, color=color, label=name)
            if column == "score" and (per_trajectory or {}).get(name):
                steps, scores = zip(*per_trajectory[name], strict=True)
                ax.plot(steps, scores, linestyle="--", color=color, label=f"{name}, per trajectory")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    results, names = Path(argv[0]), argv[1:]
    runs, per_trajectory = {}, {}
    for name in names:
        if (dump := results / name / "rollout_steps.csv").is_file():
            per_trajectory[name] = read_trajectory_scores(dump)
        rows = read_steps(results / name / "metrics.jsonl")
        write_csv(rows, results / name / "steps.csv")
        runs[name] = rows
        print(f"{name}: {len(rows)} steps -> {results / name / 'steps.csv'}")
    plot(runs, results / "training.png", per_trajectory)
    print(f"wrote {results / 'training.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
