"""Per-step CSV, summary table and plots of a scaling / trainer-mode comparison (``scripts/gpu/scale_hold.sh``).

    python experiments/gsm8k_learn/scaling_report.py RESULTS RUN [RUN ...] [--drop-validated-lag RUN,RUN] [--title TEXT]

Runs of experiments/ledger_folding (scale_hold.sh's waves G, K to N) read the same way: its ``gpus/`` presets also give 16
prompts a GPU, and a trajectory is counted once however many segments it folded into.

Each ``RESULTS/RUN`` holds verl's ``metrics.jsonl`` and the run's ``command.txt`` (GPUs, batch and mode are read
from its overrides). Writes ``RESULTS/steps.csv`` (every run's steps), ``RESULTS/summary.csv`` and
``RESULTS/summary.md`` (medians over steps ``--from`` (2) to the end: step 1 holds start-up and compilation),
``RESULTS/tail.md`` (what each run's slowest trajectory spent its time on: ``longflow/rollout/slowest/*``),
``RESULTS/phases.png`` (each run's median step split into its phases) and ``RESULTS/throughput.png``
(trajectories per second, and step times). Throughput is the trajectories (prompts x rollout.n a step) of the
steps summed, over their ``timing_s/step`` summed; tokens a second are verl's ``perf/throughput`` (per GPU) times
the GPUs, weighted the same way. The other columns are medians. ``x sync 1 GPU`` is over the first 1-GPU sync run
named; ``x mode 1 GPU`` over the mean of the run's own mode's 1-GPU runs (weak scaling within a mode; ``-`` if none).
A run with ``+trainer.v1.whole_batch_update=true`` is a mode of its own (``sync whole-batch``): its own 1-GPU baseline.
``--drop-validated-lag RUN,RUN``: in runs from before commit ec9275b the hook timed a validation's sample, not the
step's, so a step of those runs that validated (every ``trainer.test_freq``-th, and the last) gets no ``take_lag_s``.
GPUs are the trainer's (``trainer.n_gpus_per_node x trainer.nnodes``) plus, for ``separate_async``, the rollout's.
A RUN may be a path from RESULTS to a run of another result (``../long-tail-scaling-h200x4/colo_x1``): it is named
by its folder, and ``--drop-validated-lag`` takes that name.
Needs matplotlib (``pip install -e '.[plots]'``).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
from pathlib import Path

COLUMNS = {
    "step_s": "timing_s/step",
    "gen_s": "timing_s/gen",
    "old_log_prob_s": "timing_s/old_log_prob",
    "update_actor_s": "timing_s/update_actor",
    "update_weights_s": "timing_s/update_weights",
    "span_s": "longflow/rollout/span_s",
    "take_lag_s": "longflow/rollout/take_lag_s",
    "wall_max_s": "longflow/rollout/wall_s/max",
    "wall_mean_s": "longflow/rollout/wall_s/mean",
    "slowest_tool_s": "longflow/rollout/slowest/tool_s",
    "slowest_generate_s": "longflow/rollout/slowest/generate_s",
    "slowest_user_s": "longflow/rollout/slowest/user_s",
    "slowest_generated_tokens": "longflow/rollout/slowest/generated_tokens",
    "slowest_assistant_turns": "longflow/rollout/slowest/assistant_turns",
    "tokens": "perf/total_num_tokens",
    "tokens_per_s_per_gpu": "perf/throughput",
    "max_memory_allocated_gb": "actor/perf/max_memory_allocated_gb",
    "staleness_mean": "training/off_policy/trajectory_staleness/mean",
    "spans_max": "training/off_policy/trajectory_spans/max",
    "score": "critic/score/mean",
    "executed_calls": "longflow/executed_calls/mean",
}
PHASES = ("gen_s", "old_log_prob_s", "update_actor_s", "update_weights_s")
# Logged by newer packs only: a column (and a phase) where some run has it, absent otherwise, so that results made
# before it regenerate unchanged. verl has no timer on _balance_batch; the pack's is timing_s/balance_batch.
OPTIONAL = {"balance_batch_s": "timing_s/balance_batch"}
# The same for tail.md: the trajectories' wall-time quantiles and the share a time bound ended (max_trajectory_s)
OPTIONAL_TAIL = {
    "wall_p50_s": "longflow/rollout/wall_s/p50",
    "wall_p90_s": "longflow/rollout/wall_s/p90",
    "time_budget": "longflow/termination/time_budget",
}
SUMMARY = ("step_s", "gen_s", "span_s", "take_lag_s", "update_actor_s", "trajectories_per_s", "tokens_per_s")


def run_setup(command: str) -> dict[str, object]:
    """GPUs, prompts a step, rollout.n and trainer mode from a run's ``command.txt`` (presets, then overrides)."""

    def override(key: str) -> str | None:
        found = re.findall(rf"(?:^|\s){re.escape(key)}=(\S+)", command)
        return found[-1] if found else None

    preset = override("+gpus")
    per_node = int(override("trainer.n_gpus_per_node") or (preset[1:] if preset else 1))
    trainer_gpus = per_node * int(override("trainer.nnodes") or 1)
    mode = override("+mode") or override("trainer.v1.trainer_mode") or "sync"
    rollout_gpus = 0
    if mode == "separate_async":  # its preset gives rollout one node of one GPU of its own
        nodes = int(override("actor_rollout_ref.rollout.nnodes") or 1)
        rollout_gpus = nodes * int(override("actor_rollout_ref.rollout.n_gpus_per_node") or 1)
    if (override("+trainer.v1.whole_batch_update") or "").lower() == "true":
        mode += " whole-batch"  # its own line and 1-GPU baseline: a different update path, not a different trainer
    return {
        "gpus": trainer_gpus + rollout_gpus,
        "prompts": int(override("data.train_batch_size") or 16 * per_node),
        "n": int(override("actor_rollout_ref.rollout.n") or 8),
        "mode": mode,
        "test_freq": int(override("trainer.test_freq") or -1),
        "steps": int(override("trainer.total_training_steps") or 0),
    }


def read_steps(run_dir: Path, drop_validated_lag: bool = False) -> list[dict[str, object]]:
    setup = run_setup((run_dir / "command.txt").read_text())
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        data = record.get("data", record)
        if "timing_s/step" not in data:
            continue
        row: dict[str, object] = {
            "run": run_dir.name,
            "step": int(record.get("step", data.get("training/global_step"))),
        }
        row |= {k: setup[k] for k in ("gpus", "mode", "prompts")}
        row |= {name: data.get(key) for name, key in COLUMNS.items()}
        row |= {name: data[key] for name, key in OPTIONAL.items() if key in data}
        if OPTIONAL_TAIL["wall_p90_s"] in data:  # a pack with the quantiles (older ones logged time_budget alone)
            row |= {name: data.get(key) for name, key in OPTIONAL_TAIL.items()}
        validated = setup["test_freq"] > 0 and (row["step"] % setup["test_freq"] == 0 or row["step"] == setup["steps"])
        if drop_validated_lag and validated:
            row["take_lag_s"] = None
        trajectories = setup["prompts"] * setup["n"]
        row["trajectories"] = trajectories
        row["trajectories_per_s"] = trajectories / row["step_s"]
        row["tokens_per_s"] = (row["tokens_per_s_per_gpu"] or 0.0) * setup["gpus"]
        rows.append(row)
    return rows


def median(rows: list[dict[str, object]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def optional_phases(runs: dict[str, list[dict[str, object]]]) -> tuple[str, ...]:
    """The ``OPTIONAL`` columns some run logged."""
    return tuple(name for name in OPTIONAL if any(name in row for rows in runs.values() for row in rows))


def summarise(runs: dict[str, list[dict[str, object]]], first: int) -> list[dict[str, object]]:
    summary = []
    extra = optional_phases(runs)
    for name, rows in runs.items():
        kept = [r for r in rows if r["step"] >= first]
        if not kept:
            raise SystemExit(f"{name}: no step from step {first} on (its last: {rows[-1]['step'] if rows else None})")
        entry = {"run": name, "gpus": rows[0]["gpus"], "mode": rows[0]["mode"], "prompts": rows[0]["prompts"]}
        entry["steps"] = f"{kept[0]['step']}-{kept[-1]['step']}"
        entry |= {key: median(kept, key) for key in (*SUMMARY, *PHASES[1:], *extra, "max_memory_allocated_gb")}
        seconds = sum(float(r["step_s"]) for r in kept)  # rates over the steps' total time, not a median of rates
        entry["trajectories_per_s"] = sum(int(r["trajectories"]) for r in kept) / seconds
        entry["tokens_per_s"] = sum(float(r["tokens_per_s"]) * float(r["step_s"]) for r in kept) / seconds
        lags = [
            float(r["gen_s"]) - float(r["span_s"]) for r in kept if r["gen_s"] is not None and r["span_s"] is not None
        ]
        entry["gen_minus_span_max_s"] = max(lags, default=None)  # None: the run logged no span (older pack)
        entry["tokens_per_s_per_gpu"] = entry["tokens_per_s"] / entry["gpus"]
        summary.append(entry)
    base = next((s for s in summary if s["gpus"] == 1 and s["mode"] == "sync"), None)
    for entry in summary:
        entry["speedup_vs_sync_1gpu"] = entry["trajectories_per_s"] / base["trajectories_per_s"] if base else None
        # weak scaling within a mode: over the mean of that mode's 1-GPU runs (seeds), where it has any
        ones = [s["trajectories_per_s"] for s in summary if s["mode"] == entry["mode"] and s["gpus"] == 1]
        entry["speedup_vs_mode_1gpu"] = entry["trajectories_per_s"] / statistics.mean(ones) if ones else None
    return summary


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    fields = list(dict.fromkeys(key for row in rows for key in row))  # an optional column: where any row has it
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def cell(value: float | None, form: str = ".2f") -> str:
    """A table cell: ``-`` for a figure the run did not log."""
    return "-" if value is None else format(value, form)


def markdown(summary: list[dict[str, object]]) -> str:
    head = (
        "| run | GPUs | mode | prompts x 8 | steps | step s | gen s | real gen (span) s | take lag s | update s "
        "| traj/s | x sync 1 GPU | x mode 1 GPU | tokens/s | tokens/s/GPU | actor mem GB |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {s['run']} | {s['gpus']} | {s['mode']} | {s['prompts']} | {s['steps']} | {cell(s['step_s'], '.1f')} "
        f"| {cell(s['gen_s'], '.1f')} | {cell(s['span_s'], '.1f')} | {cell(s['take_lag_s'], '.3f')} "
        f"| {cell(s['update_actor_s'], '.1f')} | {s['trajectories_per_s']:.2f} | {cell(s['speedup_vs_sync_1gpu'])} "
        f"| {cell(s['speedup_vs_mode_1gpu'])} | {s['tokens_per_s']:,.0f} | {s['tokens_per_s_per_gpu']:,.0f} "
        f"| {cell(s['max_memory_allocated_gb'], '.1f')} |"
        for s in summary
    ]
    return head + "\n".join(rows) + "\n"


TAIL_NOTE = (
    "A run without `generate_s` logged `slowest/tool_s` before it counted the code blocks run inside a turn "
    "(code-fence format): its tool time there reads 0.\n"
)


def tail_markdown(runs: dict[str, list[dict[str, object]]], first: int) -> str:
    """What each run's slowest trajectory spent its time on (``longflow/rollout/slowest/*``), medians over the steps
    from ``first``; runs that did not log the rollout's timing are left out. Where some run logged the wall-time
    quantiles, they follow the mean, and the share of trajectories a time bound ended and the mean score close it."""
    quantiles = any("wall_p90_s" in r for steps in runs.values() for r in steps)
    extra_head = " p50 s | p90 s |" if quantiles else ""
    extra_tail = " ended by time bound | score |" if quantiles else ""
    columns = 11 + (4 if quantiles else 0)
    head = (
        f"| run | GPUs | mode | slowest s | mean s |{extra_head} tool time in | tool s | generate s | user s | tokens "
        f"| turns |{extra_tail}\n" + "|---" * columns + "|\n"
    )
    rows = []
    for name, steps in runs.items():
        kept = [r for r in steps if r["step"] >= first and r.get("wall_max_s") is not None]
        if not kept:
            continue
        tools = [float(r["slowest_tool_s"]) for r in kept if r.get("slowest_tool_s") is not None]
        with_tools = f"{sum(t > 0 for t in tools)} of {len(tools)} steps" if tools else "-"
        seconds = [cell(median(kept, key), ".1f") for key in ("wall_max_s", "wall_mean_s")]
        if quantiles:
            seconds += [cell(median(kept, key), ".1f") for key in ("wall_p50_s", "wall_p90_s")]
        seconds += [with_tools] + [
            cell(median(kept, f"slowest_{key}_s"), ".1f") for key in ("tool", "generate", "user")
        ]
        counts = [cell(median(kept, f"slowest_{key}"), ".0f") for key in ("generated_tokens", "assistant_turns")]
        if quantiles:
            counts += [share(kept, "time_budget"), cell(mean(kept, "score"), ".3f")]
        figures = seconds + counts
        rows.append(f"| {name} | {kept[0]['gpus']} | {kept[0]['mode']} | " + " | ".join(figures) + " |")
    return head + "\n".join(rows) + "\n\n" + TAIL_NOTE if rows else ""


def mean(rows: list[dict[str, object]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return statistics.mean(values) if values else None


def share(rows: list[dict[str, object]], key: str) -> str:
    """A per-step fraction over all the steps (each step has the same trajectories) as a percentage; ``-`` where
    the run logged it in no step (a pack from before the reason)."""
    value = mean(rows, key)
    return "-" if value is None else f"{100 * value:.1f} %"


def plot(
    results: Path, summary: list[dict[str, object]], runs: dict[str, list[dict[str, object]]], title: str, first: int
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["run"] for s in summary]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(summary)
    for phase in (*PHASES, *(name for name in OPTIONAL if name in summary[0])):
        values = [s.get(phase) or 0.0 for s in summary]
        ax.bar(names, values, bottom=bottom, label=phase.removesuffix("_s").replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    other = [max(s["step_s"] - b, 0.0) for s, b in zip(summary, bottom, strict=True)]
    ax.bar(names, other, bottom=bottom, label="other", color="lightgrey")
    ax.set_ylabel("median seconds a step")
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_title(f"Step time and its phases ({title})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results / "phases.png", dpi=120)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in dict.fromkeys(s["mode"] for s in summary):  # each mode: its runs, a line through each GPU count's mean
        mine = [s for s in summary if s["mode"] == mode]
        by_gpus = {
            g: statistics.mean(s["trajectories_per_s"] for s in mine if s["gpus"] == g)
            for g in sorted({s["gpus"] for s in mine})
        }
        (line,) = left.plot(list(by_gpus), list(by_gpus.values()), "o-" if len(by_gpus) > 1 else "o", label=mode)
        left.plot([s["gpus"] for s in mine], [s["trajectories_per_s"] for s in mine], "x", color=line.get_color())
    sync_one = [s["trajectories_per_s"] for s in summary if s["mode"] == "sync" and s["gpus"] == 1]
    gpus = sorted({s["gpus"] for s in summary})
    if sync_one:
        left.plot(gpus, [statistics.mean(sync_one) * g for g in gpus], "k--", label="sync 1 GPU x GPUs")
    left.set_xlabel("GPUs")
    left.set_ylabel(f"trajectories / s (steps {first} on; x: each run)")
    left.set_xticks(gpus)
    left.legend(fontsize=8)
    for name, rows in runs.items():
        right.plot([r["step"] for r in rows], [r["step_s"] for r in rows], "o-", label=name)
    right.set_xlabel("step")
    right.set_ylabel("seconds a step")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results / "throughput.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--from", dest="first", type=int, default=2, help="first step of the medians (default 2)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--title", default="long-tail tools", help="the workload, in the phases plot's title")
    ap.add_argument(
        "--drop-validated-lag", default="", metavar="RUN,RUN", help="these runs' validated steps get no take_lag_s"
    )
    args = ap.parse_args(argv)
    names = {Path(run).name: run for run in args.runs}  # a run of another result is named by its folder
    if len(names) < len(args.runs):
        ap.error(f"two runs share a folder name: {args.runs}")
    old = set(filter(None, args.drop_validated_lag.split(",")))
    if old - set(names):
        ap.error(f"--drop-validated-lag names {sorted(old - set(names))}, not among the runs {list(names)}")
    runs = {name: read_steps(args.results / run, name in old) for name, run in names.items()}
    write_csv(args.results / "steps.csv", [row for rows in runs.values() for row in rows])
    summary = summarise(runs, args.first)
    write_csv(args.results / "summary.csv", summary)
    (args.results / "summary.md").write_text(markdown(summary))
    if tail := tail_markdown(runs, args.first):
        (args.results / "tail.md").write_text(tail)
    if not args.no_plots:
        plot(args.results, summary, runs, args.title, args.first)
    print(markdown(summary))
    print(tail, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
