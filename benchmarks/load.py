"""Load: 2,000 concurrent 15-turn trajectories through one in-process AgentLoopWorker, three times.

    .venv/bin/python -m benchmarks.load                     # 4-8 min on 2 cores; writes docs/benchmarks/load.json
    .venv/bin/python -m benchmarks.load --trajectories 200 --profile   # smaller, plus where the time goes

LongWorkflowAgent (``bench_long_workflow``) on synthetic agent -> tool -> agent -> user traces
(7 tool rounds, 7 user turns, 15 assistant turns; short texts), instant server, the real offline
Qwen tokenizer, ``response_length`` 4096. For each of three identical batches we check that every
trajectory comes back (count in = count out) with a termination reason, and report wall time,
trajectories/s, CPU time, RSS after the batch (its output freed, ``gc.collect()`` run), the same
after glibc's ``malloc_trim(0)`` (freed heap that the allocator kept for reuse goes back to the OS,
so what remains is what the process holds), the number of Python objects the GC tracks, the
process's peak RSS, and the per-trajectory state that must not outlive a batch (interaction
instances, tool instances, pending asyncio tasks). No leak: batch 3 ~ batch 1 on all of these.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import (
    CONFIGS,
    DOCS,
    LONG_WORKFLOW,
    InstantServer,
    build_worker,
    finish,
    format_table,
    machine,
    profile_batch,
    prompt_renderer,
    reasons,
    timed_batch,
    write_json,
)
from benchmarks.fixtures import synthetic_trace
from extensions.interactions.registry import load_interactions
from extensions.tool_session import live_semaphores

MB = 1024 * 1024


def trimmed_rss(process: psutil.Process) -> float | None:
    """RSS in MB after glibc returns freed heap to the OS (None where there is no glibc)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return process.memory_info().rss / MB
    return None


def live_state(worker: Any) -> dict[str, int]:
    """Per-trajectory state still held after a batch: all of it should be 0 (the limiter holds 1 per tool)."""
    interactions = load_interactions(str(CONFIGS / "interactions.yaml"))
    return {
        "interaction_instances": sum(len(getattr(i, "_state", {})) for i in interactions.values()),
        "tool_instances": sum(len(getattr(t, "_results", {})) for t in worker.tools),
        "tool_limiter_semaphores": live_semaphores(),
        "asyncio_tasks": len(asyncio.all_tasks()) - 1,
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    worker = build_worker(CONFIGS / "tools.yaml", prompt_length=512, response_length=4096)
    traces = [synthetic_trace(i, words=args.words) for i in range(args.trajectories)]
    server = InstantServer(worker.tokenizer, traces, prompt_renderer(worker))
    samples = [t.sample(LONG_WORKFLOW) for t in traces]
    await timed_batch(worker, server, samples[:32])  # warm-up: lazy imports and caches are not a leak
    process = psutil.Process()
    gc.collect()
    baseline = process.memory_info().rss
    batches = []
    for b in range(1, args.batches + 1):
        run = await timed_batch(worker, server, samples)
        got = reasons(run.out)
        tokens = int(run.out.batch["attention_mask"].sum())
        del run.out
        gc.collect()
        batches.append(
            {
                "batch": b,
                "in": len(samples),
                "out": len(got),
                "with_reason": sum(r is not None for r in got),
                "reasons": dict(Counter(got)),
                "server_calls": run.calls,
                "tokens": tokens,
                "wall_s": run.wall_s,
                "cpu_s": run.cpu_s,
                "trajectories_per_s": len(got) / run.wall_s,
                "rss_mb": process.memory_info().rss / MB,
                "rss_trimmed_mb": trimmed_rss(process),
                "python_objects": len(gc.get_objects()),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "live_state": live_state(worker),
            }
        )
        print(f"batch {b}/{args.batches}: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU", flush=True)
    return {
        "worker": worker,
        "server": server,
        "samples": samples,
        "baseline_rss_mb": baseline / MB,
        "batches": batches,
    }


def report(m: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    batches, turns = m["batches"], 15
    rows = [
        [
            b["batch"],
            f"{b['in']} / {b['out']} / {b['with_reason']}",
            ", ".join(f"{k}: {v}" for k, v in b["reasons"].items()),
            f"{b['wall_s']:.1f}",
            f"{b['trajectories_per_s']:.1f}",
            f"{b['cpu_s']:.1f}",
            f"{1e3 * b['cpu_s'] / b['out']:.1f}",
            f"{b['rss_mb']:.0f}",
            f"{b['rss_trimmed_mb']:.0f}" if b["rss_trimmed_mb"] else "-",
            f"{b['python_objects']:,}",
            f"{b['peak_rss_mb']:.0f}",
            ", ".join(f"{v}" for v in b["live_state"].values()),
        ]
        for b in batches
    ]
    print(
        f"\n{args.trajectories} concurrent {turns}-turn trajectories (LongWorkflowAgent, tools + user turns), "
        f"RSS before batch 1: {m['baseline_rss_mb']:.0f} MB"
    )
    headers = ["batch", "in / out / with reason", "reasons", "wall s", "traj/s", "CPU s", "CPU ms/traj"]
    headers += [
        "RSS MB",
        "RSS MB trimmed",
        "Python objects",
        "peak RSS MB",
        "live: interactions, tools, limiters, tasks",
    ]
    print(format_table(headers, rows))
    first, last = batches[0], batches[-1]
    growth = {key: last[key] - first[key] for key in ("rss_mb", "rss_trimmed_mb", "python_objects") if first[key]}
    print(f"\ngrowth batch 1 -> {len(batches)}: " + ", ".join(f"{k} {v:+,.1f}" for k, v in growth.items()))
    complete = all(b["in"] == b["out"] == b["with_reason"] for b in batches)
    live = ("interaction_instances", "tool_instances", "asyncio_tasks")
    no_leftovers = all(not any(b["live_state"][k] for k in live) for b in batches)
    steady = growth.get("rss_trimmed_mb", growth["rss_mb"]) < 0.02 * first["rss_mb"]
    return {
        "settings": {k: str(v) for k, v in vars(args).items()} | {"response_length": 4096, "prompt_length": 512},
        "baseline_rss_mb": m["baseline_rss_mb"],
        "batches": batches,
        "growth_batch1_to_last": growth,
        "targets": {
            "every trajectory back with a reason": complete,
            "no per-trajectory state left": no_leftovers,
            "trimmed RSS growth batch 1 -> last < 2 %": steady,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--words", type=float, default=0.25, help="text length scale of the synthetic traces")
    parser.add_argument("--profile", action="store_true", help="also cProfile one batch of 200 (where the time goes)")
    parser.add_argument("--out", type=Path, default=DOCS / "load.json")
    args = parser.parse_args()
    started, info = time.perf_counter(), machine()
    m = asyncio.run(measure(args))
    payload = report(m, args)
    if args.profile:
        text = payload["profile"] = profile_batch(m["worker"], m["server"], m["samples"][:200], top=30)
        print(f"\n--- cProfile, one batch of 200, by own time ---\n{text}")
    write_json(args.out, finish(payload, info, started))


if __name__ == "__main__":
    main()
