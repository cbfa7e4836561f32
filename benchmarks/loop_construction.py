"""What building one agent loop costs, per sample: verl builds a new loop object for every trajectory.

    .venv/bin/python -m benchmarks.loop_construction        # ~1 min; writes docs/benchmarks/loop_construction.json

verl 0.9.1's ``AgentLoopWorker._run_agent_loop`` calls ``hydra.utils.instantiate`` on the sample's
registry entry (the YAML entry of ``agent_loop_config_path``) with the worker's config, tokenizer and
tools, then ``run``s it. This measures, in CPU time per loop (median of 5 repeats of 300):

1. ``hydra.utils.instantiate`` exactly as verl calls it, for the benchmarks' ``bench_long_workflow``
   entry (seven keys), the same class with a bare entry (``_target_`` and ``name``), and verl's
   ``tool_agent``: how much of the cost is hydra turning the entry into an OmegaConf node per sample;
2. the constructors alone, called directly (no hydra): LongWorkflowAgent vs ToolAgentLoop;
3. the pack's own per-sample steps inside ``LongWorkflowAgent.__init__``, each in isolation (the
   settings are parsed once per entry and cached: ``loop_settings.parse_settings``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra

from benchmarks.common import CONFIGS, DOCS, LONG_WORKFLOW, STOCK, build_worker, machine, write_json

REPEATS, CALLS = 5, 300


def cpu_us(fn: Callable[[], Any], calls: int = CALLS) -> float:
    """Median over REPEATS of the CPU microseconds per call."""
    fn()
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(calls):
            fn()
        times.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS / "loop_construction.json")
    args = parser.parse_args()

    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    import extensions.custom_rollouts as cr
    from extensions.episode import think_token_ids
    from extensions.loop_settings import parse_settings
    from extensions.verl_compat import agent_loop_registry

    worker = build_worker(CONFIGS / "tools.yaml")
    registry = agent_loop_registry()
    registry["bench_bare"] = {"_target_": registry[LONG_WORKFLOW]["_target_"], "name": "bench_bare"}
    shared = {
        "trainer_config": DictConfigWrap(config=worker.config),
        "server_manager": None,
        "tokenizer": worker.tokenizer,
        "processor": worker.processor,
        "hf_model_type": worker.hf_model_type,
        "dataset_cls": worker.dataset_cls,
        "data_config": DictConfigWrap(worker.config.data),
    }

    def instantiate(name: str) -> Callable[[], Any]:
        return lambda: hydra.utils.instantiate(config=registry[name], tools=ToolListWrap(worker.tools), **shared)

    entry = {k: v for k, v in registry[LONG_WORKFLOW].items() if k != "_target_"}
    own = {k: v for k, v in entry.items() if k != "name"}
    settings = parse_settings(own, entry=LONG_WORKFLOW)
    with contextlib.redirect_stdout(io.StringIO()):
        figures = {
            "instantiate_us": {
                LONG_WORKFLOW: cpu_us(instantiate(LONG_WORKFLOW)),
                "bench_bare": cpu_us(instantiate("bench_bare")),
                STOCK: cpu_us(instantiate(STOCK)),
            },
            "constructor_us": {
                "LongWorkflowAgent": cpu_us(
                    lambda: cr.LongWorkflowAgent(tools=ToolListWrap(worker.tools), **shared, **entry)
                ),
                "ToolAgentLoop": cpu_us(lambda: ToolAgentLoop(tools=ToolListWrap(worker.tools), **shared)),
            },
            "pack_steps_us": {
                "parse_settings (cached)": cpu_us(lambda: parse_settings(own, entry=LONG_WORKFLOW), 3000),
                "load_interactions (cached)": cpu_us(lambda: cr.load_interactions(settings.interaction_config_path)),
                "end_token_ids": cpu_us(lambda: cr.end_token_ids(worker.tokenizer), 3000),
                "think_token_ids": cpu_us(lambda: think_token_ids(worker.tokenizer), 3000),
                "settings_from_trainer_config": cpu_us(lambda: cr.settings_from_trainer_config(worker.config), 3000),
            },
        }
    for section, rows in figures.items():
        print(f"\n{section} (CPU microseconds per call, median of {REPEATS} repeats)")
        for name, value in rows.items():
            print(f"  {name:<32} {value:9.1f}")
    inst = figures["instantiate_us"]
    print(f"\nLongWorkflowAgent / stock, per-sample construction: {inst[LONG_WORKFLOW] / inst[STOCK]:.2f}")
    write_json(args.out, {"machine": machine(), "repeats": REPEATS, "calls": CALLS, **figures})


if __name__ == "__main__":
    main()
