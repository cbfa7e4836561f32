"""verl 0.9.1's trainer paths on CPU with the pack's real loops: the pieces tests/test_v1_path.py
and tests/test_turn_advantages_real_loop.py share.

One mixed batch (``CASES``): ``long_workflow`` with a tool round, a user turn and a malformed call,
stock ``tool_agent`` and ``single_turn_agent``, and a loop returning a LIST of outputs; two sessions
per prompt (``rollout.n=2``) that take different scripts, a right and a wrong answer, so every
group has something to compare. The config (``trainer_config``) uses the pack's ``compute_score``
with shaping weights ``W``, so the loop writes each assistant turn's process reward.

verl's v1 trainer (``verl/trainer/ppo/v1``) runs agent loops in ``AgentLoopWorkerTQ`` Ray actors that
put every output into TransferQueue, rewards in ``RewardLoopWorker`` actors, and everything else in
``PPOTrainer`` on GPU workers. Here the real classes run in this process, each with the smallest
stand-in for what needs a GPU or a Ray actor:

- ``RecordingWorkerTQ``: verl's ``AgentLoopWorkerTQ`` class (the Ray actor's class, built in-process
  like ``tests/conftest.py`` builds ``AgentLoopWorker``); it keeps a deep copy of every loop output
  under its TransferQueue key before verl's ``_agent_loop_postprocess`` stores it, so tests compare
  what arrives with what the loop produced.
- ``InProcessRewardHandle``: gives a real ``RewardLoopWorker`` the ``handle.compute_score.remote``
  call shape of its Ray actor handle.
- ``InProcessManager``: stands in for ``AgentLoopManagerTQ`` (which starts the worker actors): one
  worker, and it returns when the worker's background tasks have finished.
- ``ListOutputLoop``: a LongWorkflowAgent that returns a LIST of outputs (the first assistant turn,
  then the whole trajectory), the shape v1 accepts for several training samples per trajectory.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

from extensions.custom_rollouts import LongWorkflowAgent
from extensions.testing.scripted_server import Alternatives
from extensions.verl_config import compose_verl_config

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
W = {"w_turn": 0.5, "w_tool": 0.25, "w_format": 0.125}
"""Reward shaping weights (``reward.custom_reward_function.reward_kwargs``); w_outcome stays 1."""


def tool_call(name: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


MALFORMED = '<tool_call>\n{"name": "echo", "arguments": {"text": "x"}\n</tool_call>'
SCRIPTED_USER = {"name": "scripted", "user_messages": ["Check again."]}
CASES: dict[str, tuple[str, str, dict[str, Any] | None, tuple[list[str], list[str]]]] = {
    "long": (
        "lw_test",
        "4",
        SCRIPTED_USER,
        (
            [tool_call("echo", text="hi"), "It is 4.\n#### 4", "Still 4.\n#### 4"],
            [MALFORMED, "It is 5.\n#### 5", "Still 5.\n#### 5"],
        ),
    ),
    "tool": ("tool_agent", "7", None, ([tool_call("echo", text="yo"), "#### 7"], ["#### 6"])),
    "single": ("single_turn_agent", "3", None, (["#### 3"], ["#### 8"])),
    "list": (
        "lw_list",
        "2",
        {"name": "scripted", "user_messages": []},
        ([tool_call("echo", text="ab"), "#### 2"], ["#### 9"]),
    ),
}
"""uid -> (agent loop, ground truth, interaction kwargs, (right script, wrong script)). uids have no '_':
verl's replay buffer splits keys ``{uid}_{session}_{i}`` at the first one."""


def trainer_config(model_dir: Path, prompt_length: int, response_length: int) -> Any:
    """verl's ppo_trainer config for the mixed batch: turn_grpo, the pack's reward, no critic, no KL."""
    return compose_verl_config(
        [
            f"actor_rollout_ref.model.path={model_dir}",
            f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
            f"actor_rollout_ref.rollout.response_length={response_length}",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={FIXTURES / 'tools.yaml'}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={ROOT / 'extensions' / 'custom_rollouts.yaml'}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "actor_rollout_ref.rollout.n=2",
            f"data.train_batch_size={len(CASES)}",
            "reward.custom_reward_function.path=pkg://extensions.custom_rewards",
            *(f"+reward.custom_reward_function.reward_kwargs.{k}={v}" for k, v in W.items()),
            "algorithm.adv_estimator=turn_grpo",
            "algorithm.use_kl_in_reward=false",
            # old_log_probs = rollout_log_probs (verl's bypass mode): no actor is needed before advantages
            "algorithm.rollout_correction.bypass_mode=true",
            "critic.enable=false",
        ]
    )


def register_test_loops() -> None:
    """The two loop names of ``CASES``, with the test interactions and the pack's strict hermes parser."""
    from extensions.verl_compat import agent_loop_registry

    registry = agent_loop_registry()
    interactions = str(FIXTURES / "interactions.yaml")
    registry["lw_test"] = {
        "_target_": "extensions.custom_rollouts.LongWorkflowAgent",
        "name": "lw_test",
        "tool_parser": "hermes_strict",
        "interaction_config_path": interactions,
    }
    registry["lw_list"] = {
        "_target_": "tests.trainer_harness.ListOutputLoop",
        "name": "lw_list",
        "interaction_config_path": interactions,
    }


def sample_rows(uids: list[str]) -> list[dict[str, Any]]:
    """One dataset row per uid of ``CASES`` (GSM8K-style reward columns; the prompt carries the marker)."""
    rows = []
    for i, uid in enumerate(uids):
        loop, truth, interaction_kwargs, _ = CASES[uid]
        row = {
            "raw_prompt": [
                {"role": "system", "content": "You are a careful solver."},
                {"role": "user", "content": f"Q-{uid}"},
            ],
            "agent_name": loop,
            "uid": uid,
            "index": i,
            "data_source": "openai/gsm8k",
            "reward_model": {"ground_truth": truth},
            "extra_info": {"index": i},
        }
        if interaction_kwargs is not None:
            row["interaction_kwargs"] = interaction_kwargs
        rows.append(row)
    return rows


def script(uids: list[str]) -> dict[str, Alternatives]:
    """The scripted server's script: each prompt's two sessions take the right and the wrong script."""
    return {f"Q-{uid}": Alternatives(*CASES[uid][3]) for uid in uids}


def is_right(uid: str, response_text: str) -> bool:
    """Which script a trajectory took, from its text: the right script's last reply ends it."""
    return response_text.rstrip().removesuffix("<|im_end|>").endswith(f"#### {CASES[uid][1]}")


LOOP_OUTPUTS: dict[str, AgentLoopOutput] = {}
"""TransferQueue key -> deep copy of the loop's output as the loop returned it."""


class RecordingWorkerTQ(AgentLoopWorkerTQ.__ray_metadata__.modified_class):  # type: ignore[name-defined,misc]
    """verl's AgentLoopWorkerTQ, recording each output before verl post-processes it."""

    async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> None:
        outputs = output if isinstance(output, list) else [output]
        for i, item in enumerate(outputs):
            LOOP_OUTPUTS[f"{kwargs['uid']}_{kwargs['session_id']}_{i}"] = item.model_copy(deep=True)
        return await super()._agent_loop_postprocess(output, validate, **kwargs)


class _Remote:
    """``handle.method.remote(data)`` in-process. Ray pickles the argument, so the actor works on a copy;
    so does this. Without the copy, verl's reward manager (naive.py ``run_single``) updates the sample's
    shared ``extra_info`` dict in place with each session's ``extras``, and concurrent sessions of one
    prompt could be scored on each other's final answer."""

    def __init__(self, fn: Any):
        self.fn = fn

    async def remote(self, data: Any) -> Any:
        return await self.fn(copy.deepcopy(data))


class InProcessRewardHandle:
    """A ``RewardLoopWorker`` behind the call shape of its Ray actor handle."""

    def __init__(self, worker: RewardLoopWorker):
        self.compute_score = _Remote(worker.compute_score)


class InProcessManager:
    """``AgentLoopManagerTQ.generate_sequences`` for one in-process worker; blocks until all outputs are stored."""

    def __init__(self, worker: Any, config: Any):
        self.worker, self.config = worker, config

    def generate_sequences(self, batch: Any) -> None:
        asyncio.run(self._generate(batch))

    async def _generate(self, batch: Any) -> None:
        # verl's reward manager keeps the event loop it was built on, so build it on this one
        self.worker.reward_loop_worker_handles = [InProcessRewardHandle(RewardLoopWorker(self.config))]
        await self.worker.generate_sequences(batch)
        while self.worker.background_tasks:
            await asyncio.gather(*list(self.worker.background_tasks))


class ListOutputLoop(LongWorkflowAgent):
    """Returns ``[first assistant turn, whole trajectory]``; each output keeps its own ``extras``."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:  # type: ignore[override]
        final = await super().run(sampling_params, **kwargs)
        first = final.model_copy(deep=True)
        extras = first.extra_fields["extras"]
        turn = next(t for t in extras["turns"] if t["role"] == "assistant")
        end = turn["span"][1]
        first.response_ids, first.response_mask = first.response_ids[:end], first.response_mask[:end]
        if first.response_logprobs is not None:
            first.response_logprobs = first.response_logprobs[:end]
        extras["turns"] = [copy.deepcopy(turn)]
        return [first, final]
