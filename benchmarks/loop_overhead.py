"""CPU time the agent loop spends per turn OUTSIDE generation: LongWorkflowAgent vs verl's ToolAgentLoop.

    .venv/bin/python -m benchmarks.loop_overhead            # 4-6 min on 2 cores; writes docs/benchmarks/loop_overhead.json
    .venv/bin/python -m benchmarks.loop_overhead --gsm8k PATH --out /tmp/lo.json --profile

GSM8K comes from ``--gsm8k`` (a train .jsonl or a Hugging Face id), else ``$LONGFLOW_GSM8K_DIR/train.jsonl``,
else the public ``openai/gsm8k``.

Everything runs through verl's real AgentLoopWorker, in-process, with the real offline Qwen
tokenizer and an instant server (``benchmarks.common.InstantServer``: pre-tokenized replies,
no tokenizer work). Workloads, identical traces for both loops:

- ``gsm8k``: GSM8K solutions replayed as tool use: every ``<<expr=result>>`` is a hermes
  ``calculator`` call whose tool response is the recorded result; the rest is the final answer.
- ``syn-tools``: the agent -> tool part of the 15-turn synthetic traces (7 tool rounds, then the
  answer): verl's stock loop has no user turns, so this is workload (b)'s side-by-side.
- ``syn-full`` (LongWorkflowAgent only): 15 assistant turns, agent -> tool -> agent -> user.

1. batch: ``time.process_time()`` around one ``generate_sequences`` of all traces, minus the CPU
   spent inside the server, per assistant turn. Includes verl's per-sample work (building the
   loop object, padding the output). Loops alternate within each repeat; the ratio is paired.
2. per turn: one trajectory at a time, each state handler wrapped to record its CPU time minus
   the server's. Turn k = handling assistant reply k + the tool round or user turn after it.
   ``run()`` = the loop's own CPU per trajectory (no verl per-sample work).

``--profile`` adds a cProfile of one batch per loop (executor inlined so tokenizer work shows).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

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
    profile_batch,
    prompt_renderer,
    reasons,
    spread,
    timed_batch,
    write_json,
)
from benchmarks.fixtures import Trace, gsm8k_traces, synthetic_trace, without_user_turns
from extensions.custom_rollouts import LongWorkflowAgent
from extensions.data.sources import default_gsm8k_source

# (workload, loop, the termination reason every trajectory must report; None: the loop records none)
COMBOS = [
    ("gsm8k", LONG_WORKFLOW, "final_answer"),
    ("gsm8k", STOCK, None),
    ("syn-tools", LONG_WORKFLOW, "final_answer"),
    ("syn-tools", STOCK, None),
    ("syn-full", LONG_WORKFLOW, "interaction_done"),
]
GROWTH = [  # (name, workload, loop, series, earlier turn, later turn): same kind of turn, more context
    ("syn-full LW: tool cycle, turn 13 / turn 1", "syn-full", LONG_WORKFLOW, "turn", 1, 13),
    ("syn-full LW: user cycle, turn 14 / turn 2", "syn-full", LONG_WORKFLOW, "turn", 2, 14),
    ("syn-full LW: assistant reply handling, turn 15 / turn 1", "syn-full", LONG_WORKFLOW, "assistant", 1, 15),
    ("syn-full LW: assistant reply handling, turn 15 / turn 2", "syn-full", LONG_WORKFLOW, "assistant", 2, 15),
    ("syn-tools LW: tool cycle, turn 7 / turn 1", "syn-tools", LONG_WORKFLOW, "turn", 1, 7),
    ("syn-tools stock: tool cycle, turn 7 / turn 1", "syn-tools", STOCK, "turn", 1, 7),
]


class TurnProbe:
    """Wraps the loops' state handlers; records (kind, CPU s minus the server's CPU s) per call."""

    KINDS = {
        "_handle_pending_state": "setup",
        "_handle_generating_state": "assistant",
        "_handle_processing_tools_state": "tool",
        "_handle_interacting_state": "user",
        "run": "run",
    }

    def __init__(self, *classes: type) -> None:
        self.classes, self.saved, self.events = classes, [], []
        self.server: InstantServer | None = None

    def __enter__(self) -> TurnProbe:
        for cls in self.classes:
            for name, kind in self.KINDS.items():
                if name in vars(cls):  # each class defines its own handlers: nothing is timed twice
                    self.saved.append((cls, name, vars(cls)[name]))
                    setattr(cls, name, self._wrap(vars(cls)[name], kind))
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self.saved):
            setattr(cls, name, original)

    def _wrap(self, original: Any, kind: str) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            cpu, server = time.process_time(), self.server.cpu_s
            try:
                return await original(*args, **kwargs)
            finally:
                self.events.append((kind, time.process_time() - cpu - (self.server.cpu_s - server)))

        return timed

    def take(self) -> tuple[list[float], list[float], float]:
        """(assistant-reply cost per turn, whole-turn cost per turn, run() cost) of the last trajectory."""
        assistant, whole, run = [], [], 0.0
        for kind, cost in self.events:
            if kind == "assistant":
                assistant.append(cost)
                whole.append(cost)
            elif kind in ("tool", "user"):
                whole[-1] += cost
            elif kind == "run":
                run = cost
        self.events.clear()
        return assistant, whole, run


async def per_turn_pass(worker: Any, server: InstantServer, traces: list[Trace], loop: str, probe: TurnProbe) -> dict:
    """One trajectory at a time: per-turn medians over traces, and per-trajectory run()/verl costs."""
    probe.server = server
    turn, assistant, runs, verl = defaultdict(list), defaultdict(list), [], []
    for trace in traces:
        result = await timed_batch(worker, server, [trace.sample(loop)], collect=False)
        a_costs, w_costs, run = probe.take()
        for k, (a, w) in enumerate(zip(a_costs, w_costs, strict=True), start=1):
            turn[k].append(w)
            assistant[k].append(a)
        runs.append(run / len(trace.replies))
        verl.append(result.loop_cpu_s - run)
    median = lambda d: {k: statistics.median(v) for k, v in sorted(d.items())}  # noqa: E731
    return {
        "turn": median(turn),
        "assistant": median(assistant),
        "run_per_turn": statistics.median(runs),
        "verl_per_traj": statistics.median(verl),
    }


def check(result: BatchRun, what: str, expected: str | None, traces: list[Trace], server: InstantServer) -> None:
    got, replies = reasons(result.out), sum(len(t.replies) for t in traces)
    if any(r != expected for r in got) or result.calls != replies or server.fallbacks:
        raise RuntimeError(f"{what}: reasons {set(got)} (want {expected}), server calls {result.calls}/{replies}")


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    worker = build_worker(CONFIGS / "tools.yaml", response_length=8192)
    synthetic = [synthetic_trace(i) for i in range(args.synthetic)]
    workloads = {
        "gsm8k": gsm8k_traces(args.gsm8k or default_gsm8k_source("train"), args.traces),
        "syn-tools": [without_user_turns(t) for t in synthetic],
        "syn-full": synthetic,
    }
    render = prompt_renderer(worker)
    servers = {w: InstantServer(worker.tokenizer, traces, render) for w, traces in workloads.items()}
    cpu = defaultdict(list)
    for repeat in range(args.repeats + 1):  # repeat 0 warms up and checks the traces
        streams = {}
        for workload, loop, expected in COMBOS:
            traces = workloads[workload]
            result = await timed_batch(worker, servers[workload], [t.sample(loop) for t in traces])
            check(result, f"{workload}/{loop}", expected, traces, servers[workload])
            streams[workload, loop] = result.out.batch["input_ids"]
            if repeat:
                cpu[workload, loop].append(result.loop_cpu_s / result.calls)
        for workload in ("gsm8k", "syn-tools") if not repeat else ():
            if not streams[workload, LONG_WORKFLOW].equal(streams[workload, STOCK]):
                raise RuntimeError(f"{workload}: the two loops produced different token streams")
        print(f"batch repeat {repeat}/{args.repeats} done", flush=True)
    passes = defaultdict(list)
    with TurnProbe(ToolAgentLoop, LongWorkflowAgent) as probe:
        for p in range(args.turn_passes):
            for workload, loop, _ in COMBOS:
                passes[workload, loop].append(
                    await per_turn_pass(worker, servers[workload], workloads[workload], loop, probe)
                )
            print(f"per-turn pass {p + 1}/{args.turn_passes} done", flush=True)
    return {"worker": worker, "workloads": workloads, "servers": servers, "cpu": cpu, "passes": passes}


def report(m: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    cpu, passes, workloads = m["cpu"], m["passes"], m["workloads"]
    over = lambda combo, *keys: spread([_dig(p, keys) for p in passes[combo]])  # noqa: E731
    batch, rows = {}, []
    for workload, loop, _ in COMBOS:
        traces, combo = workloads[workload], (workload, loop)
        turns = sum(len(t.replies) for t in traces)
        entry = {"traces": len(traces), "assistant_turns": turns, "batch_cpu_s_per_turn": spread(cpu[combo])}
        entry |= {
            "run_cpu_s_per_turn": over(combo, "run_per_turn"),
            "verl_cpu_s_per_traj": over(combo, "verl_per_traj"),
        }
        batch[f"{workload}/{loop}"] = entry
        rows.append(
            [workload, loop, len(traces), f"{turns / len(traces):.1f}"]
            + [fmt_spread(entry[k], 1e3, 2) for k in list(entry)[2:]]
        )
    print("\nCPU ms outside generation, median [min-max] over repeats/passes")
    print(
        format_table(
            [
                "workload",
                "loop",
                "traces",
                "turns/traj",
                "batch, per turn",
                "loop run(), per turn",
                "verl per-sample work, per traj",
            ],
            rows,
        )
    )

    ratios = {}
    for workload in ("gsm8k", "syn-tools"):
        lw, st = (workload, LONG_WORKFLOW), (workload, STOCK)
        ratios[workload] = {
            "batch": spread([a / b for a, b in zip(cpu[lw], cpu[st], strict=True)]),
            "run": spread([a["run_per_turn"] / b["run_per_turn"] for a, b in zip(passes[lw], passes[st], strict=True)]),
        }
    print("\nLongWorkflowAgent / stock ToolAgentLoop CPU, same traces (target <= 1.0)")
    print(
        format_table(
            ["workload", "batch (incl. verl per-sample work)", "loop run() only"],
            [[w, fmt_spread(r["batch"], digits=2), fmt_spread(r["run"], digits=2)] for w, r in ratios.items()],
        )
    )

    growth = {
        name: spread([_dig(p, (s, b)) / _dig(p, (s, a)) for p in passes[w, loop]]) for name, w, loop, s, a, b in GROWTH
    }
    print("\nPer-turn cost growth with context: later / earlier turn of the same kind (target <= 1.5)")
    print(format_table(["comparison", "ratio"], [[n, fmt_spread(g, digits=2)] for n, g in growth.items()]))

    full, tools_lw, tools_st = ("syn-full", LONG_WORKFLOW), ("syn-tools", LONG_WORKFLOW), ("syn-tools", STOCK)
    turn_rows = []
    for k in range(1, 16):
        row = [k, "tool" if k % 2 and k < 15 else "user" if k < 15 else "end"]
        row += [fmt_spread(over(full, "turn", k), 1e3, 2), fmt_spread(over(full, "assistant", k), 1e3, 2)]
        row += [fmt_spread(over(c, "turn", k), 1e3, 2) if k <= 8 else "" for c in (tools_lw, tools_st)]
        turn_rows.append(row)
    print("\nCPU ms per turn, one trajectory at a time (median over traces; [min-max] over passes)")
    print(
        format_table(
            [
                "turn",
                "syn-full: then",
                "syn-full LW: whole turn",
                "syn-full LW: reply only",
                "syn-tools LW",
                "syn-tools stock",
            ],
            turn_rows,
        )
    )
    return {
        "settings": {k: str(v) for k, v in vars(args).items()},
        "batch": batch,
        "ratio_long_workflow_vs_stock": ratios,
        "growth": growth,
        "per_turn_passes": {f"{w}/{loop}": passes[w, loop] for w, loop, _ in COMBOS},
        "targets": {
            "ratio <= 1.0 (batch)": {w: r["batch"]["median"] <= 1.0 for w, r in ratios.items()},
            "ratio <= 1.0 (run)": {w: r["run"]["median"] <= 1.0 for w, r in ratios.items()},
            "growth <= 1.5": {n: g["median"] <= 1.5 for n, g in growth.items()},
        },
    }


def _dig(value: Any, keys: tuple) -> Any:
    for key in keys:
        value = value[key]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--gsm8k",
        default=None,
        help="GSM8K train file or Hugging Face id (default: $LONGFLOW_GSM8K_DIR/train.jsonl if set, else openai/gsm8k)",
    )
    parser.add_argument("--traces", type=int, default=200, help="GSM8K traces")
    parser.add_argument("--synthetic", type=int, default=64, help="synthetic 15-turn traces")
    parser.add_argument("--repeats", type=int, default=5, help="timed batch repeats (after one warm-up)")
    parser.add_argument("--turn-passes", type=int, default=3, help="one-trajectory-at-a-time passes")
    parser.add_argument("--profile", action="store_true", help="also print cProfile top functions per loop")
    parser.add_argument("--out", type=Path, default=DOCS / "loop_overhead.json")
    args = parser.parse_args()
    started, info = time.perf_counter(), machine()
    m = asyncio.run(measure(args))
    payload = report(m, args)
    if args.profile:
        payload["profile"] = {}
        for workload, loop in (("syn-tools", LONG_WORKFLOW), ("syn-tools", STOCK), ("syn-full", LONG_WORKFLOW)):
            samples = [t.sample(loop) for t in m["workloads"][workload]]
            text = payload["profile"][f"{workload}/{loop}"] = profile_batch(
                m["worker"], m["servers"][workload], samples
            )
            print(f"\n--- cProfile {workload}/{loop}, one batch, by own time ---\n{text}")
    write_json(args.out, finish(payload, info, started))


if __name__ == "__main__":
    main()
