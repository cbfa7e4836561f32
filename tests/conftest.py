"""Shared fixtures: a real offline Qwen tokenizer and verl's real AgentLoopWorker, in-process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from verl.protocol import DataProto

from extensions.qwen_tokenizer import cached_qwen_model_dir
from extensions.rollout.data import batch_from_rows
from extensions.testing.scripted_server import Reply, ScriptedServer
from extensions.verl_compat import agent_loop_registry
from extensions.verl_config import build_agent_loop_worker, compose_verl_config

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
PROMPT_LENGTH = 1024
RESPONSE_LENGTH = 3072
PACK_LOOPS = ROOT / "extensions" / "custom_rollouts.yaml"
EXPERIMENTS = sorted(p.parent.name for p in (ROOT / "experiments").glob("*/config.yaml"))
"""Every experiment folder with a config.yaml (what main_ppo and the rollout driver compose)."""


def compose_experiment(experiment: str, *overrides: str) -> Any:
    """``experiments/<experiment>/config.yaml`` with ``overrides``, composed as ``main_ppo --config-path`` does."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "experiments" / experiment), version_base=None):
        return compose("config", overrides=list(overrides))


@pytest.fixture(scope="session")
def qwen_dir() -> Path:
    return cached_qwen_model_dir()


def build_worker(
    qwen_dir: Path, *, tools: Path, agent_loops: Path, tool_format: str, overrides: Sequence[str] = ()
) -> Any:
    """verl's AgentLoopWorker in-process (no server yet) on the offline tokenizer and the given files."""
    config = compose_verl_config(
        [
            f"actor_rollout_ref.model.path={qwen_dir}",
            f"actor_rollout_ref.rollout.prompt_length={PROMPT_LENGTH}",
            f"actor_rollout_ref.rollout.response_length={RESPONSE_LENGTH}",
            f"actor_rollout_ref.rollout.multi_turn.format={tool_format}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loops}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            *overrides,
        ]
    )
    return build_agent_loop_worker(config, llm_client=None)


@pytest.fixture(scope="session")
def worker(qwen_dir: Path) -> Any:
    """One AgentLoopWorker for the session; tests swap its llm_client and register loop entries."""
    return build_worker(qwen_dir, tools=FIXTURES / "tools.yaml", agent_loops=PACK_LOOPS, tool_format="hermes")


@pytest.fixture(autouse=True)
def _pack_loop_entries() -> None:
    """Every test starts with custom_rollouts.yaml's entries in verl's (process-wide) loop registry.

    A worker built on another agent-loop file (the rollout driver's tests, an experiment's) registers
    that file's ``long_workflow`` over the pack's; the session ``worker`` must not see it.
    """
    import yaml

    registry = agent_loop_registry()
    for entry in yaml.safe_load(PACK_LOOPS.read_text()):
        registry[entry["name"]] = dict(entry)


@pytest.fixture
def tokenizer(worker: Any) -> Any:
    return worker.tokenizer


def segment_worker(
    qwen_dir: Path, tmp: Path, entries: list[dict[str, Any]], *, tools: Path = FIXTURES / "tools.yaml",
    tool_format: str = "hermes",
) -> Any:  # fmt: skip
    """An AgentLoopWorker on these agent-loop entries (written to ``tmp/agent_loops.yaml``) that takes a folding
    loop's list of segment outputs."""
    import yaml

    from extensions.verl_compat import accept_segment_lists

    loops = tmp / "agent_loops.yaml"
    loops.write_text(yaml.safe_dump(entries))
    return accept_segment_lists(build_worker(qwen_dir, tools=tools, agent_loops=loops, tool_format=tool_format))


def register_loop(name: str, **settings: Any) -> str:
    """Register a LongWorkflowAgent entry as a YAML line would, with the test interactions."""
    settings.setdefault("interaction_config_path", str(FIXTURES / "interactions.yaml"))
    agent_loop_registry()[name] = {"_target_": "extensions.custom_rollouts.LongWorkflowAgent", "name": name, **settings}
    return name


def make_batch(samples: list[dict[str, Any]]) -> DataProto:
    """A batch as verl's dataloader builds it, with the batch index as ``index``."""
    batch = batch_from_rows(samples)
    batch.non_tensor_batch["index"] = np.arange(len(samples))
    return batch


def sample(marker: str, agent_name: str, **extra: Any) -> dict[str, Any]:
    """A sample whose prompt carries ``marker`` so the scripted server finds its replies."""
    return {
        "raw_prompt": [{"role": "system", "content": "You are a careful solver."}, {"role": "user", "content": marker}],
        "agent_name": agent_name,
        **extra,
    }


async def run_batch(worker: Any, script: dict[str, list[Reply]], samples: list[dict[str, Any]]) -> DataProto:
    worker.llm_client = ScriptedServer(worker.tokenizer, script)
    return await worker.generate_sequences(make_batch(samples))


class Row:
    """One trajectory of an output batch, unpadded."""

    def __init__(self, out: DataProto, i: int):
        n = int(out.batch["attention_mask"][i, PROMPT_LENGTH:].sum())
        self.response_ids = out.batch["responses"][i, :n].tolist()
        self.mask = out.batch["response_mask"][i, :n].tolist()
        self.logprobs = out.batch["rollout_log_probs"][i, :n].tolist()
        p = int(out.batch["attention_mask"][i, :PROMPT_LENGTH].sum())
        self.prompt_ids = out.batch["prompts"][i, PROMPT_LENGTH - p :].tolist()
        self.extras = out.non_tensor_batch["extras"][i]
        self.turn_scores = out.non_tensor_batch["turn_scores"][i]
        self.tool_rewards = out.non_tensor_batch["tool_rewards"][i]
        self.num_turns = int(out.non_tensor_batch["__num_turns__"][i])

    @property
    def reason(self) -> str:
        return self.extras["termination_reason"]

    def span(self, turn: dict[str, Any]) -> tuple[list[int], list[int]]:
        lo, hi = turn["span"]
        return self.response_ids[lo:hi], self.mask[lo:hi]


@pytest.fixture(scope="module")
def transfer_queue():
    """Ray and a real TransferQueue for a test module (tq.init asks Ray for 3 logical CPUs); shut down after it."""
    import ray
    import transfer_queue as tq

    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        yield tq
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()
