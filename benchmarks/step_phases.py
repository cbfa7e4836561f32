"""Per-phase step times of verl training runs, from verl's file logger (``metrics.jsonl``).

    python -m benchmarks.step_phases NAME=PATH/metrics.jsonl ... [--skip 2] [--json OUT.json]

Prints one row per run: the median (and min-max) of ``timing_s/step`` and its phases (generation,
old log-prob, actor update, weight sync), tokens per step, actor MFU, and the actor update's cost per
1,000 tokens, over every logged step after the first ``--skip`` (start-up and compilation). The
figures in docs/benchmarks/training_step.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PHASES = {
    "step_s": "timing_s/step",
    "gen_s": "timing_s/gen",
    "old_log_prob_s": "timing_s/old_log_prob",
    "update_actor_s": "timing_s/update_actor",
    "update_weights_s": "timing_s/update_weights",
    "tokens": "perf/total_num_tokens",
    "throughput_tok_s": "perf/throughput",
    "mfu_actor": "perf/mfu/actor",
}


def phase_table(path: Path, skip: int) -> dict[str, dict[str, float]]:
    """{figure: {median, min, max}} over the training steps of one metrics.jsonl."""
    steps: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        steps.setdefault(int(row["step"]), {}).update(row["data"])
    rows = [steps[s] for s in sorted(steps) if "timing_s/step" in steps[s]][skip:]
    table = {}
    for name, key in PHASES.items():
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        if values:
            table[name] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    per_k = [
        1000 * r["timing_s/update_actor"] / r["perf/total_num_tokens"] for r in rows if r.get("perf/total_num_tokens")
    ]
    if per_k:
        ms = [1000 * v for v in per_k]
        table["update_actor_ms_per_1k_tokens"] = {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}
    table["steps"] = {"median": float(len(rows)), "min": float(len(rows)), "max": float(len(rows))}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=PATH/metrics.jsonl")
    parser.add_argument("--skip", type=int, default=2, help="leading training steps left out (default 2)")
    parser.add_argument("--json", type=Path, help="also write the tables here")
    args = parser.parse_args(argv)
    tables = {}
    for spec in args.runs:
        name, _, path = spec.partition("=")
        tables[name] = phase_table(Path(path), args.skip)
    names = list(PHASES) + ["update_actor_ms_per_1k_tokens", "steps"]
    print("median (min-max) over steps after the first", args.skip)
    print(f"{'figure':32s}" + "".join(f"{n:>34s}" for n in tables))
    for figure in names:
        cells = []
        for table in tables.values():
            v = table.get(figure)
            cells.append("-" if v is None else f"{v['median']:.4g} ({v['min']:.4g}-{v['max']:.4g})")
        print(f"{figure:32s}" + "".join(f"{c:>34s}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps(tables, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
