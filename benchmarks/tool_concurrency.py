"""Do slow tools overlap? Wall time of trajectories whose tools await ``asyncio.sleep(0.2)``.

    .venv/bin/python -m benchmarks.tool_concurrency         # ~2 min on 2 cores; writes docs/benchmarks/tool_concurrency.json

Through verl's real AgentLoopWorker, in-process, instant server (``benchmarks.common``):

1. rounds: 256 concurrent trajectories x 5 tool rounds, one 200 ms call per round. If calls of
   different trajectories overlap perfectly the batch takes 5 x 0.2 = 1.0 s (target <= 1.3 x).
2. parallel: 64 trajectories, one turn with k = 1, 2, 4, 8 parallel calls. If calls of one turn
   overlap, k calls take as long as one (target: wall(k) / wall(1) <= 1.2).

Loops: ``bench_parallel`` (LongWorkflowAgent with ``max_parallel_calls: 8``,
``default_tool_concurrency: 512``), verl's stock ``tool_agent`` (``multi_turn.max_parallel_calls=8``),
and for (1) also ``bench_long_workflow`` (the shipped cap, ``default_tool_concurrency: 64``).

A batch runs on one event loop, so its wall time is at least the CPU time of the loop and verl's
per-sample work. To tell waiting on tools apart from that, the tool records when each call ran:
"tool time per trajectory" = the sum over its rounds of (last call end - first call start), ideally
5 x 0.2 s in (1) and 0.2 s for every k in (2); "peak" = most calls sleeping at once. For
LongWorkflowAgent we also sum its own per-round latency, which includes queueing on its
per-tool concurrency cap.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.common import (
    CONFIGS,
    DOCS,
    LONG_WORKFLOW,
    STOCK,
    BatchRun,
    InstantServer,
    build_worker,
    finish,
    fmt_spread,
    format_table,
    machine,
    prompt_renderer,
    reasons,
    spread,
    timed_batch,
    write_json,
)
from benchmarks.fixtures import SleepTool, Trace, tool_call

PARALLEL = "bench_parallel"
SLEEP_S = 0.2  # = sleep_s in benchmarks/configs/sleep_tools.yaml


def sleep_trace(index: int, rounds: int, calls: int, tag: str) -> Trace:
    """``rounds`` assistant turns of ``calls`` parallel ``wait`` calls each, then an answer."""
    key = f"{tag}-{index:05d}"  # labels "<trajectory>/<round>/<call>" let the tool's records be grouped
    replies = ["".join(tool_call("wait", label=f"{key}/{r}/{c}") for c in range(calls)) for r in range(rounds)]
    prompt = [{"role": "user", "content": f"[task {key}] Wait {rounds} times, then say done."}]
    return Trace(key, prompt, [*replies, "done"])


def call_stats(run: BatchRun, calls: list[tuple[str, float, float]]) -> dict[str, float]:
    """Tool time per trajectory (sum of round spans), peak concurrent calls, and LW's own round latency sums."""
    rounds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for label, start, end in calls:
        trajectory, round_, _ = label.split("/")
        rounds[trajectory, round_] += [start, end]
    per_trajectory: dict[str, float] = defaultdict(float)
    for (trajectory, _), times in rounds.items():
        per_trajectory[trajectory] += max(times) - min(times)
    events = sorted([(s, 1) for _, s, _ in calls] + [(e, -1) for _, _, e in calls])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    extras = run.out.non_tensor_batch.get("extras")
    lw = [
        sum(t["latency_s"] for t in e["turns"] if t["role"] == "tool")
        for e in (extras if extras is not None else [])
        if e
    ]
    tool_time = sorted(per_trajectory.values())
    return {
        "wall_s": run.wall_s,
        "cpu_s": run.loop_cpu_s,
        "tool_time_median_s": statistics.median(tool_time),
        "tool_time_max_s": tool_time[-1],
        "peak_concurrent_calls": peak,
        "lw_round_latency_sum_median_s": statistics.median(lw) if lw else None,
    }


def check(run: BatchRun, loop: str, traces: list[Trace], calls: int) -> None:
    """Every trajectory came back, with the right reason, and every scripted call ran."""
    got, n, replies = reasons(run.out), len(traces), traces[0].replies
    want_calls = n * sum(r.count("<tool_call>") for r in replies)
    if len(got) != n or any(r != (None if loop == STOCK else "final_answer") for r in got) or calls != want_calls:
        raise RuntimeError(f"{loop}: reasons {set(got)}, {len(got)}/{n} back, {calls}/{want_calls} tool calls")


async def measure(args: argparse.Namespace) -> dict[Any, list[dict[str, float]]]:
    worker = build_worker(CONFIGS / "sleep_tools.yaml", prompt_length=256, response_length=2048)
    render = prompt_renderer(worker)
    rounds = [sleep_trace(i, args.rounds, 1, "rounds") for i in range(args.trajectories)]
    parallel = {k: [sleep_trace(i, 1, k, f"k{k}") for i in range(args.parallel_trajectories)] for k in (1, 2, 4, 8)}
    servers = {"rounds": InstantServer(worker.tokenizer, rounds, render)}
    servers |= {k: InstantServer(worker.tokenizer, traces, render) for k, traces in parallel.items()}
    plan = [("rounds", loop, rounds) for loop in (PARALLEL, STOCK, LONG_WORKFLOW)]
    plan += [(k, loop, parallel[k]) for k in (1, 2, 4, 8) for loop in (PARALLEL, STOCK)]
    stats: dict[Any, list[dict[str, float]]] = defaultdict(list)
    for repeat in range(args.repeats + 1):  # repeat 0 warms up, on 16 trajectories per batch
        for what, loop, traces in plan:
            traces = traces if repeat else traces[:16]
            SleepTool.CALLS.clear()
            run = await timed_batch(worker, servers[what], [t.sample(loop) for t in traces])
            check(run, loop, traces, len(SleepTool.CALLS))
            if repeat:
                stats[what, loop].append(call_stats(run, SleepTool.CALLS))
        print(f"repeat {repeat}/{args.repeats} done", flush=True)
    return stats


def cells(runs: list[dict[str, float]], ratio: dict[str, float], tool_ratio: dict[str, float]) -> list[str]:
    get = lambda key: spread([r[key] for r in runs])  # noqa: E731
    return [
        fmt_spread(get("wall_s"), digits=2),
        fmt_spread(ratio, digits=2),
        fmt_spread(get("cpu_s"), digits=2),
        f"{fmt_spread(get('tool_time_median_s'), digits=2)} / {max(r['tool_time_max_s'] for r in runs):.2f}",
        fmt_spread(tool_ratio, digits=2),
        f"{int(statistics.median(r['peak_concurrent_calls'] for r in runs))}",
        fmt_spread(get("lw_round_latency_sum_median_s"), digits=2) if runs[0]["lw_round_latency_sum_median_s"] else "-",
    ]


def report(stats: dict, args: argparse.Namespace) -> dict[str, Any]:
    ideal = args.rounds * SLEEP_S
    head = [
        "wall s",
        "CPU s",
        "tool time per traj s, median / max",
        "tool time / ideal",
        "peak calls",
        "LW round latency sum s",
    ]
    rounds, rows = {}, []
    for loop in (PARALLEL, STOCK, LONG_WORKFLOW):
        runs = stats["rounds", loop]
        vs_ideal = spread([r["wall_s"] / ideal for r in runs])
        tool_vs_ideal = spread([r["tool_time_median_s"] / ideal for r in runs])
        rounds[loop] = {"runs": runs, "wall_vs_ideal": vs_ideal, "tool_time_vs_ideal": tool_vs_ideal}
        rows.append([loop, *cells(runs, vs_ideal, tool_vs_ideal)])
    print(
        f"\n{args.trajectories} trajectories x {args.rounds} rounds of one {SLEEP_S:g} s call; ideal {ideal:g} s; median [min-max] over repeats"
    )
    print(format_table(["loop", head[0], "wall / ideal (target <= 1.3)", *head[1:]], rows))

    parallel, rows = {}, []
    for loop in (PARALLEL, STOCK):
        for k in (1, 2, 4, 8):
            runs, base = stats[k, loop], stats[1, loop]
            vs_k1 = spread([a["wall_s"] / b["wall_s"] for a, b in zip(runs, base, strict=True)])
            tool_vs_k1 = spread(
                [a["tool_time_median_s"] / b["tool_time_median_s"] for a, b in zip(runs, base, strict=True)]
            )
            parallel[f"{loop}/k={k}"] = {"runs": runs, "wall_vs_k1": vs_k1, "tool_time_vs_k1": tool_vs_k1}
            rows.append([loop, k, *cells(runs, vs_k1, tool_vs_k1)])
    print(f"\n{args.parallel_trajectories} trajectories, one turn of k parallel {SLEEP_S:g} s calls")
    print(
        format_table(
            [
                "loop",
                "k",
                head[0],
                "wall / wall(k=1) (target <= 1.2)",
                head[1],
                head[2],
                "tool time / (k=1)",
                *head[4:],
            ],
            rows,
        )
    )
    return {
        "settings": {k: str(v) for k, v in vars(args).items()} | {"sleep_s": SLEEP_S, "ideal_rounds_s": ideal},
        "rounds": rounds,
        "parallel": parallel,
        "targets": {
            "rounds: wall <= 1.3 x ideal": {loop: r["wall_vs_ideal"]["median"] <= 1.3 for loop, r in rounds.items()},
            "rounds: tool time <= 1.3 x ideal": {
                loop: r["tool_time_vs_ideal"]["median"] <= 1.3 for loop, r in rounds.items()
            },
            "k calls: wall <= 1.2 x one call": {key: r["wall_vs_k1"]["median"] <= 1.2 for key, r in parallel.items()},
            "k calls: tool time <= 1.2 x one call": {
                key: r["tool_time_vs_k1"]["median"] <= 1.2 for key, r in parallel.items()
            },
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parallel-trajectories", type=int, default=64, help="x 8 calls must fit the cap of 512")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (after a small warm-up)")
    parser.add_argument("--out", type=Path, default=DOCS / "tool_concurrency.json")
    args = parser.parse_args()
    started, info = time.perf_counter(), machine()
    payload = report(asyncio.run(measure(args)), args)
    write_json(args.out, finish(payload, info, started))


if __name__ == "__main__":
    main()
