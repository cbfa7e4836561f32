"""cProfile of one gsm8k batch per loop (LongWorkflowAgent, then verl's stock ToolAgentLoop), cumulative view.

    .venv/bin/python -m benchmarks.loop_profile [--gsm8k PATH] [--traces 200] [--top 45]

Same setup as ``benchmarks.loop_overhead`` (verl's AgentLoopWorker in-process, the instant server, recorded
tool results), one warm-up batch per loop, then one profiled batch each with verl's tokenizer thread pool
inlined. Prints the functions of the agent loops, verl's Continuous Token rendering, output padding and hydra's
instantiate, by cumulative time: where the loop's CPU goes beyond what ``loop_overhead`` measures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats

from benchmarks.common import (
    CONFIGS,
    LONG_WORKFLOW,
    STOCK,
    InlineExecutor,
    InstantServer,
    build_worker,
    prompt_renderer,
    timed_batch,
)
from benchmarks.fixtures import gsm8k_traces
from extensions.data.sources import default_gsm8k_source

FOCUS = (
    r"(extensions/|agent_loop.py|tool_agent_loop.py|continuous_token.py|instantiate|_pad_token_ids|"
    r"apply_chat_template|encode_plus|\bpad\b|flatten|deepcopy|gc)"
)


async def profile(gsm8k: str, traces: int, top: int) -> None:
    asyncio.get_running_loop().set_default_executor(InlineExecutor())
    worker = build_worker(CONFIGS / "tools.yaml", response_length=8192)
    workload = gsm8k_traces(gsm8k, traces)
    server = InstantServer(worker.tokenizer, workload, prompt_renderer(worker))
    for loop in (LONG_WORKFLOW, STOCK):
        await timed_batch(worker, server, [t.sample(loop) for t in workload])  # warm-up
    for loop in (LONG_WORKFLOW, STOCK):
        profiler = cProfile.Profile()
        profiler.enable()
        await timed_batch(worker, server, [t.sample(loop) for t in workload])
        profiler.disable()
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(FOCUS, top)
        print(f"===== {loop} =====\n{stream.getvalue()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--gsm8k",
        default=None,
        help="train .jsonl or Hugging Face id (default: $LONGFLOW_GSM8K_DIR/train.jsonl, else openai/gsm8k)",
    )
    parser.add_argument("--traces", type=int, default=200)
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args()
    asyncio.run(profile(args.gsm8k or default_gsm8k_source("train"), args.traces, args.top))


if __name__ == "__main__":
    main()
