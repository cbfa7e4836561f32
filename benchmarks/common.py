"""Shared pieces of the benchmarks: verl's real AgentLoopWorker in-process, an instant server, tools, tables.

Not run directly; see ``docs/benchmarks/README.md`` for the three benchmark commands.

- ``InstantServer``: verl's LLM client contract (``generate -> TokenOutput``) answering from
  pre-tokenized traces by (request_id, turn); the first call of a request finds its trace by
  an exact lookup of the prompt ids, so a call costs a dict lookup and no tokenizer work. The
  CPU spent inside ``generate`` is counted so benchmarks can subtract it.
- ``build_worker`` / ``timed_batch``: verl's real AgentLoopWorker in-process; one timed batch.
- ``profile_batch``: cProfile of one batch with verl's thread-pool work made visible.
- tables, spreads, machine description, JSON output.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from verl.protocol import DataProto
from verl.workers.rollout.replica import TokenOutput

from benchmarks.fixtures import Trace
from extensions.qwen_tokenizer import cached_qwen_model_dir
from extensions.rollout.data import batch_from_rows
from extensions.verl_config import build_agent_loop_worker, compose_verl_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "configs"
DOCS = ROOT / "docs" / "benchmarks"
LONG_WORKFLOW = "bench_long_workflow"
STOCK = "tool_agent"
MARKER = re.compile(r"\[task ([\w-]+)\]")


def make_batch(samples: Sequence[dict[str, Any]]) -> DataProto:
    """A batch as verl's dataloader builds it, with the batch index as ``index``."""
    batch = batch_from_rows(list(samples))
    batch.non_tensor_batch["index"] = np.arange(len(samples))
    return batch


# -- server ----------------------------------------------------------------------------


class InstantServer:
    """verl's LLM client answering from pre-tokenized traces; ``cpu_s`` is the CPU spent inside it."""

    def __init__(self, tokenizer: Any, traces: Sequence[Trace], prompt_ids: Callable[[Trace], list[int]]):
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        self.replies = {
            t.key: [tokenizer.encode(r, add_special_tokens=False) + [eos] for r in t.replies] for t in traces
        }
        self.logprobs = {k: [[-0.25] * len(ids) for ids in replies] for k, replies in self.replies.items()}
        self.by_prompt = {tuple(prompt_ids(t)): t.key for t in traces}
        if len(self.by_prompt) != len(traces):
            raise ValueError("two traces render to the same prompt; give each a distinct [task ...] marker")
        self.reset()

    def reset(self) -> None:
        self.by_request: dict[str, list[Any]] = {}
        self.cpu_s, self.calls, self.fallbacks = 0.0, 0, 0

    def _find(self, prompt_ids: list[int]) -> str:
        key = self.by_prompt.get(tuple(prompt_ids))
        if key is None:  # should not happen: counted and reported
            self.fallbacks += 1
            key = MARKER.findall(self.tokenizer.decode(prompt_ids))[0]
        return key

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        start = time.process_time()
        state = self.by_request.get(request_id)
        if state is None:
            state = self.by_request[request_id] = [self._find(prompt_ids), 0]
        key, turn = state
        state[1] += 1
        ids, logprobs = self.replies[key][turn], self.logprobs[key][turn]
        limit = sampling_params.get("max_tokens")
        if limit is not None and len(ids) > limit:
            ids, logprobs = ids[:limit], logprobs[:limit]
        output = TokenOutput.model_construct(
            token_ids=list(ids),
            log_probs=list(logprobs) if sampling_params.get("logprobs") else None,
            routed_experts=None,
            stop_reason="completed",
            num_preempted=0,
            extra_fields={"min_global_steps": None, "max_global_steps": None},
        )
        self.calls += 1
        self.cpu_s += time.process_time() - start
        return output


# -- worker ----------------------------------------------------------------------------


def build_worker(
    tool_config: Path, *, prompt_length: int = 1024, response_length: int = 8192, overrides: Sequence[str] = ()
) -> Any:
    """verl's real AgentLoopWorker, in-process, with the real offline Qwen tokenizer and hermes tool calls."""
    config = compose_verl_config(
        [
            f"actor_rollout_ref.model.path={cached_qwen_model_dir()}",
            f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
            f"actor_rollout_ref.rollout.response_length={response_length}",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=100000",  # no char cut in stock
            "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=8",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={CONFIGS / 'agent_loops.yaml'}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            *overrides,
        ]
    )
    with contextlib.redirect_stdout(io.StringIO()):  # BaseTool.__init__ prints its schema
        return build_agent_loop_worker(config, llm_client=None)


def prompt_renderer(worker: Any) -> Callable[[Trace], list[int]]:
    """The first prompt ids both loops send for a trace (same builder, same tool schemas)."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    builder = create_continuous_token_builder(worker.tokenizer, hf_model_type=worker.hf_model_type)
    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in worker.tools]
    return lambda trace: builder.build_initial_tokens(trace.messages, tools=schemas or None)


@dataclass
class BatchRun:
    """One ``generate_sequences`` call, timed."""

    out: DataProto
    cpu_s: float
    server_cpu_s: float
    wall_s: float
    calls: int

    @property
    def loop_cpu_s(self) -> float:
        """CPU time outside generation: the whole process minus the server's own time."""
        return self.cpu_s - self.server_cpu_s


async def timed_batch(
    worker: Any, server: InstantServer, samples: Sequence[dict[str, Any]], *, collect: bool = True
) -> BatchRun:
    """One ``generate_sequences`` with ``server`` as the LLM client; ``collect``: gc first (untimed)."""
    batch = make_batch(samples)
    worker.llm_client = server
    server.reset()
    if collect:
        gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    out = await worker.generate_sequences(batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return BatchRun(out, cpu, server.cpu_s, wall, server.calls)


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs ``run_in_executor`` work in the calling thread, so cProfile sees it."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def profile_batch(worker: Any, server: InstantServer, samples: Sequence[dict[str, Any]], top: int = 25) -> str:
    """cProfile of one ``generate_sequences`` (top functions by own time), executor inlined:
    verl runs tokenizer work in a thread pool, which cProfile cannot see."""

    async def run() -> str:
        asyncio.get_running_loop().set_default_executor(InlineExecutor())
        profiler = cProfile.Profile()
        profiler.enable()
        await timed_batch(worker, server, samples)
        profiler.disable()
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(top)
        return stream.getvalue()

    return asyncio.run(run())


def reasons(out: DataProto) -> list[str | None]:
    """Each trajectory's termination reason (None for loops that record none, like verl's stock loop)."""
    extras = out.non_tensor_batch.get("extras")
    if extras is None:
        return [None] * len(out)
    return [e["termination_reason"] if e else None for e in extras]


# -- reporting -------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt_spread(s: dict[str, float], scale: float = 1.0, digits: int = 3) -> str:
    return f"{s['median'] * scale:.{digits}f} [{s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f}]"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table (readable in a terminal too)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def machine() -> dict[str, Any]:
    """What the numbers were measured on (the machine may be shared: see the load averages)."""
    cpu: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = text.partition(":")
            cpu.setdefault(key.strip(), value.strip())
    import verl

    return {
        "cpu_model": f"{cpu.get('model name', 'unknown')} (family {cpu.get('cpu family')}, model {cpu.get('model')})",
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "verl": verl.__version__,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def finish(payload: dict[str, Any], info: dict[str, Any], started: float) -> dict[str, Any]:
    """Put the machine description first, with the load average at the end and the elapsed time."""
    end = {
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return {"machine": info | end, **payload}


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")
