"""Rollout throughput A/B on a GPU: LongWorkflowAgent vs verl's ToolAgentLoop, one vLLM server.

Run on the GPU machine (after scripts/gpu/install_on_gpu.sh):

    python3 scripts/gpu/rollout_throughput.py --data outputs/gpu_tp/train.parquet \
        --model /tmp/longflow/qwen25-coder-0.5b-instruct --out $OUT

One process builds one vLLM server + AgentLoopManager (the rollout driver's ServerBackend),
runs a warm-up batch of 8, then the same samples forced to ``long_workflow``, ``tool_agent``
and ``long_workflow`` again (order effects stay visible), each as one batch. Per run it reports
trajectories/s, generated tokens/s (sum of response_mask), wall time, the generation share,
termination reasons and mean num_turns; a markdown table on stdout, JSON under --out.

Generation share, two numbers per run (AgentLoopManager only keeps aggregates, so this script
wraps ``AgentLoopManager._performance_metrics`` to keep every trajectory's metrics):
- ``gen_share_of_loop``: sum over trajectories of ``generate_sequences`` seconds divided by the
  sum of (``generate_sequences`` + ``tool_calls``) seconds; the loop's other work (tokenizing,
  interactions, bookkeeping) has no per-trajectory timer in verl, so it is not in the divisor.
- ``gen_share_of_wall``: mean per-trajectory ``generate_sequences`` seconds divided by the
  batch's wall time (all trajectories of a batch start together, so this is the share of the
  wall during which an average trajectory was waiting on the LLM server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "gsm8k_code_verify"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="parquet with the samples (e.g. outputs/gpu_tp/train.parquet)")
    parser.add_argument("--model", required=True, help="HF model folder")
    parser.add_argument("--out", required=True, help="folder for throughput.json")
    parser.add_argument("--samples", type=int, default=256, help="samples per run, one batch")
    parser.add_argument("--warmup", type=int, default=8, help="warm-up batch size (0: none)")
    parser.add_argument(
        "--order",
        default="long_workflow,tool_agent,long_workflow",
        help="comma-separated agent loops, run in this order after the warm-up",
    )
    parser.add_argument("--num-workers", type=int, default=8)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    return parser.parse_args(argv)


def overrides_for(args: argparse.Namespace) -> list[str]:
    return [
        f"actor_rollout_ref.model.path={args.model}",
        "actor_rollout_ref.rollout.nnodes=1",
        "actor_rollout_ref.rollout.n_gpus_per_node=1",
        f"actor_rollout_ref.rollout.agent.num_workers={args.num_workers}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={EXPERIMENT / 'agent_loops.yaml'}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={EXPERIMENT / 'tools.yaml'}",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.8",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.use_remove_padding=false",
        # verl's rollout default is load_format=dummy (random weights, synced later by the trainer);
        # with no trainer here the server must load the real weights itself.
        "actor_rollout_ref.rollout.load_format=auto",
        *args.overrides,
    ]


CAPTURED: list[list[list[dict[str, Any]]]] = []


def capture_per_trajectory_metrics() -> None:
    """Keep each call's per-trajectory metrics (verl reduces them to min/mean/max)."""
    from extensions.verl_compat import capture_performance_metrics

    capture_performance_metrics(CAPTURED.append)


def _f(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def summarize_run(name: str, out: Any, wall: float, metrics: list[list[dict[str, Any]]] | None) -> dict[str, Any]:
    from extensions.rollout.convert import row_tokens

    n = len(out)
    generated = sum(int(sum(row_tokens(out, i)[2])) for i in range(n))
    response_tokens = sum(len(row_tokens(out, i)[1]) for i in range(n))
    extras = out.non_tensor_batch.get("extras")
    reasons = Counter(
        (dict(extras[i] or {}).get("termination_reason") if extras is not None else None) for i in range(n)
    )
    turns = out.non_tensor_batch.get("__num_turns__")
    row: dict[str, Any] = {
        "agent_name": name,
        "trajectories": n,
        "wall_s": round(wall, 3),
        "trajectories_per_s": round(n / wall, 3),
        "generated_tokens": generated,
        "generated_tokens_per_s": round(generated / wall, 1),
        "response_tokens_incl_tool": response_tokens,
        "mean_num_turns": round(float(np.mean(turns)), 3) if turns is not None else None,
        "termination_reasons": {str(k): v for k, v in reasons.most_common()},
    }
    if metrics:
        flat = [m for chunk in metrics for m in chunk]
        gen = np.array([float(m["generate_sequences"]) for m in flat])
        tool = np.array([float(m["tool_calls"]) for m in flat])
        row.update(
            mean_traj_generate_s=round(float(gen.mean()), 3),
            mean_traj_tool_calls_s=round(float(tool.mean()), 3),
            gen_share_of_loop=round(float(gen.sum() / max(gen.sum() + tool.sum(), 1e-9)), 4),
            gen_share_of_wall=round(float(gen.mean() / wall), 4),
        )
    timing = out.meta_info.get("timing") or {}
    row["verl_timing"] = {k: _f(v) for k, v in timing.items()}
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| # | agent_name | traj | wall s | traj/s | gen tok/s | gen tokens | gen share (loop) | "
        "gen share (wall) | mean turns | termination reasons |"
    )
    lines = [head, "|" + "---|" * 11]
    for i, r in enumerate(rows):
        lines.append(
            f"| {i} | {r['agent_name']} | {r['trajectories']} | {r['wall_s']:.1f} | {r['trajectories_per_s']:.2f} | "
            f"{r['generated_tokens_per_s']:.0f} | {r['generated_tokens']} | {r.get('gen_share_of_loop', 'n/a')} | "
            f"{r.get('gen_share_of_wall', 'n/a')} | {r['mean_num_turns']} | "
            f"{', '.join(f'{k}: {v}' for k, v in r['termination_reasons'].items())} |"
        )
    return "\n".join(lines)


async def run_all(backend: Any, dataset: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    from extensions.rollout.data import batches

    plan = ([("warmup:long_workflow", args.warmup)] if args.warmup else []) + [
        (name, args.samples) for name in args.order.split(",")
    ]
    rows = []
    for label, size in plan:
        name = label.split(":")[-1]
        batch = next(batches(dataset, size, size))
        batch.non_tensor_batch["agent_name"][:] = name
        CAPTURED.clear()
        print(f"== run {label}: {len(batch)} samples", flush=True)
        started = time.perf_counter()
        out = await backend.generate(batch)
        wall = time.perf_counter() - started
        row = summarize_run(name, out, wall, CAPTURED[-1] if CAPTURED else None)
        row["label"] = label
        print(json.dumps({k: v for k, v in row.items() if k != "verl_timing"}), flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from extensions.rollout.backends import ServerBackend
    from extensions.rollout.cli import compose_experiment
    from extensions.rollout.data import load_dataset

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    config, _ = compose_experiment(str(EXPERIMENT), overrides_for(args))
    capture_per_trajectory_metrics()
    t0 = time.perf_counter()
    backend = ServerBackend(config)
    startup = time.perf_counter() - t0
    print(f"== server + AgentLoopManager up in {startup:.1f} s", flush=True)
    dataset = load_dataset([args.data], backend.tokenizer, config.data)
    try:
        rows = asyncio.run(run_all(backend, dataset, args))
    finally:
        backend.close()
    measured = [r for r in rows if not r["label"].startswith("warmup")]
    result: dict[str, Any] = {"startup_s": round(startup, 1), "runs": rows, "command": sys.argv}
    lw = [r["trajectories_per_s"] for r in measured if r["agent_name"] == "long_workflow"]
    ta = [r["trajectories_per_s"] for r in measured if r["agent_name"] == "tool_agent"]
    if lw and ta:
        result["long_workflow_vs_tool_agent_traj_per_s"] = round(float(np.mean(lw)) / float(np.mean(ta)), 4)
    (out_dir / "throughput.json").write_text(json.dumps(result, indent=2, default=str))
    print(table(rows))
    if "long_workflow_vs_tool_agent_traj_per_s" in result:
        print(f"long_workflow / tool_agent trajectories/s: {result['long_workflow_vs_tool_agent_traj_per_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
