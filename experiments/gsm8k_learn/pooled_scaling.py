"""Weak scaling pooled over seeds: several runs a GPU count, their steps summed before the ratio is taken.

    python experiments/gsm8k_learn/pooled_scaling.py --base RUN [RUN ...] --scaled RUN [RUN ...] [--from 2]

Each RUN is a run folder of a result (``docs/results/NAME/RUN``: verl's ``metrics.jsonl`` and the run's
``command.txt``, read as ``scaling_report.py`` reads them). A group's trajectories a second are all its runs'
trajectories of steps ``--from`` (2) on over their summed ``timing_s/step``; tokens a second the same with verl's
``perf/total_num_tokens``. So a seed whose trajectories ran long weighs by the time it took, not as one ratio of
several. Prints a markdown table: each run, each group pooled, and the scaled group over the base group, in
trajectories and in tokens; with as many base runs as scaled ones, also each pair's ratios (the i-th of each list).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("scaling_report", Path(__file__).with_name("scaling_report.py"))
scaling_report = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(scaling_report)


def totals(run: Path, first: int) -> dict[str, float]:
    """A run's trajectories, tokens and seconds over its steps from ``first`` on."""
    kept = [row for row in scaling_report.read_steps(run) if row["step"] >= first]
    if not kept:
        raise SystemExit(f"{run}: no step from step {first} on")
    if any(row["tokens"] is None for row in kept):
        raise SystemExit(f"{run}/metrics.jsonl: a step from step {first} on has no perf/total_num_tokens")
    return {
        "gpus": float(kept[0]["gpus"]),
        "steps": float(len(kept)),
        "trajectories": float(sum(int(row["trajectories"]) for row in kept)),
        "tokens": sum(float(row["tokens"]) for row in kept),
        "seconds": sum(float(row["step_s"]) for row in kept),
    }


def pooled(groups: list[dict[str, float]]) -> dict[str, float]:
    gpus = {group["gpus"] for group in groups}
    if len(gpus) > 1:
        raise SystemExit(f"runs pooled together must have one GPU count, not {sorted(gpus)}")
    return {key: sum(group[key] for group in groups) for key in ("steps", "trajectories", "tokens", "seconds")} | {
        "gpus": gpus.pop()
    }


def rates(group: dict[str, float]) -> tuple[float, float, float]:
    """Trajectories a second, tokens a second, tokens a trajectory."""
    return (
        group["trajectories"] / group["seconds"],
        group["tokens"] / group["seconds"],
        group["tokens"] / group["trajectories"],
    )


def speedup(scaled: dict[str, float], base: dict[str, float]) -> tuple[float, float]:
    """The scaled group's trajectories a second and tokens a second over the base group's."""
    (traj, tokens, _), (base_traj, base_tokens, _) = rates(scaled), rates(base)
    return traj / base_traj, tokens / base_tokens


def table(base: dict[str, dict[str, float]], scaled: dict[str, dict[str, float]]) -> str:
    lines = [
        "| runs | GPUs | steps | traj/s | tokens/s | tokens a trajectory |",
        "|---|---|---|---|---|---|",
    ]
    base_pooled, scaled_pooled = pooled(list(base.values())), pooled(list(scaled.values()))
    rows = [*base.items(), *scaled.items(), ("base, pooled", base_pooled), ("scaled, pooled", scaled_pooled)]
    for name, group in rows:
        traj, tokens, per = rates(group)
        lines.append(
            f"| {name} | {group['gpus']:.0f} | {group['steps']:.0f} | {traj:.2f} | {tokens:,.0f} | {per:,.0f} |"
        )
    lines += ["", "| scaled over base | trajectories/s | tokens/s |", "|---|---|---|"]
    pairs = list(zip(base, scaled, strict=True)) if len(base) == len(scaled) else []
    for one, other in pairs:
        traj, tokens = speedup(scaled[other], base[one])
        lines.append(f"| {other} / {one} | {traj:.3f} | {tokens:.3f} |")
    traj, tokens = speedup(scaled_pooled, base_pooled)
    lines.append(f"| pooled | **{traj:.3f}** | **{tokens:.3f}** |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", nargs="+", type=Path, required=True, help="the runs on fewer GPUs (one a seed)")
    ap.add_argument("--scaled", nargs="+", type=Path, required=True, help="the runs on more GPUs (one a seed)")
    ap.add_argument("--from", dest="first", type=int, default=2, help="first step counted (default 2)")
    args = ap.parse_args(argv)
    named = [run.name for run in (*args.base, *args.scaled)]
    if len(set(named)) < len(named):
        ap.error(f"two runs share a folder name: {named}")
    base = {run.name: totals(run, args.first) for run in args.base}
    scaled = {run.name: totals(run, args.first) for run in args.scaled}
    print(table(base, scaled), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
