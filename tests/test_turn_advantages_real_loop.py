"""turn_grpo on batches the real loops produce, through verl 0.9.1's legacy trainer path (no Ray).

The mixed batch of tests/trainer_harness.py (``long_workflow``, stock ``tool_agent`` and
``single_turn_agent``; two sessions per prompt, a right and a wrong one) runs through verl's
in-process ``AgentLoopWorker`` with a real ``RewardLoopWorker`` (the pack's ``compute_score``), is
joined to its prompts as ``RayPPOTrainer.fit`` does, and goes through the pack-hooked
``ray_trainer.compute_advantage(..., adv_estimator="turn_grpo")``. The loop that returns a LIST of
outputs is v1-only (verl's legacy ``_agent_loop_postprocess`` takes one output); tests/test_v1_path.py
covers it.

Run: ``PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_turn_advantages_real_loop.py``
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo import core_algos, ray_trainer

from extensions import custom_advantages as ca
from extensions.rollout.data import batch_from_rows
from extensions.testing.scripted_server import ScriptedServer
from extensions.verl_config import build_agent_loop_worker
from tests.conftest import PROMPT_LENGTH, RESPONSE_LENGTH
from tests.trainer_harness import (
    InProcessRewardHandle,
    is_right,
    register_test_loops,
    sample_rows,
    script,
    trainer_config,
)

UIDS = ["long", "tool", "single"]
EPS = 1e-6


def z(values: list[float]) -> list[float]:
    g = torch.tensor(values)
    return ((g - g.mean()) / (g.std() + EPS)).tolist()


async def test_legacy_compute_advantage_on_the_real_loop_batch(qwen_dir) -> None:
    config = trainer_config(qwen_dir, PROMPT_LENGTH, RESPONSE_LENGTH)
    register_test_loops()
    worker = build_agent_loop_worker(config, llm_client=None)
    worker.llm_client = ScriptedServer(worker.tokenizer, script(UIDS))
    worker.reward_loop_worker_handles = [InProcessRewardHandle(RewardLoopWorker(config))]
    prompts = batch_from_rows(sample_rows(UIDS)).repeat(repeat_times=2, interleave=True)  # rollout.n = 2
    data = await worker.generate_sequences(prompts)
    # RayPPOTrainer.fit joins the prompts' columns (uid, ...) back: batch.union(gen_batch_output)
    data.non_tensor_batch = {**prompts.non_tensor_batch, **data.non_tensor_batch}
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]  # use_kl_in_reward: false
    rewards, mask = data.batch["token_level_rewards"].clone(), data.batch["response_mask"].clone()
    uids, rows = data.non_tensor_batch["uid"], list(data.non_tensor_batch["extras"])

    algorithm = config.algorithm
    out = ray_trainer.compute_advantage(
        data,
        adv_estimator=algorithm.adv_estimator,
        gamma=algorithm.gamma,
        lam=algorithm.lam,
        num_repeat=config.actor_rollout_ref.rollout.n,
        norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
        config=algorithm,
    )
    adv = out.batch["advantages"]
    expected, stats = ca.turn_level_advantages(rewards, mask, uids, rows, gamma=1.0, norm_by_std=True)
    assert torch.equal(adv, expected) and torch.equal(out.batch["returns"], expected)
    assert (stats["fallback_rows"], stats["fallback_reasons"]) == (4, {"no_records": 4})
    assert torch.equal(adv[mask == 0], torch.zeros(int((mask == 0).sum())))

    # the stock loops' rows: verl's GRPO of their groups, to the bit
    stock = [i for i, uid in enumerate(uids) if uid != "long"]
    grpo, _ = core_algos.compute_grpo_outcome_advantage(rewards[stock], mask[stock], uids[stock])
    assert torch.equal(adv[stock], grpo)
    # the long_workflow group by hand: G_k = S - sum_{j<k} r_j (see tests/test_v1_path.py)
    returns = {True: [1.75, 1.25, 1.125], False: [0.125, 0.25, 0.125]}
    long_rows = [i for i, uid in enumerate(uids) if uid == "long"]
    assert len(long_rows) == 2
    for i in long_rows:
        n = int(data.batch["attention_mask"][i, PROMPT_LENGTH:].sum())
        ok = is_right("long", worker.tokenizer.decode(data.batch["responses"][i, :n]))
        assert float(rewards[i].sum()) == (1.75 if ok else 0.125)
        turns = [t for t in rows[i]["turns"] if t["role"] == "assistant"]
        assert len(turns) == 3
        for k, turn in enumerate(turns):
            lo, hi = turn["span"]
            # turn 1: GRPO; later turns: G_k minus the group's G_k summed over N = 2, over the std of
            # every return of the group (both rows reach all three turns)
            pair, pooled = (
                torch.tensor([returns[ok][k], returns[not ok][k]]),
                torch.tensor(returns[True] + returns[False]),
            )
            value = z([returns[ok][k], returns[not ok][k]])[0] if k == 0 else None
            if k:
                value = ((pair[0] - pair.sum() / 2) / (pooled.std() + EPS)).item()
            assert adv[i, lo:hi].tolist() == pytest.approx([value] * (hi - lo), rel=1e-6)
        assert np.count_nonzero(adv[i].numpy()) == int(mask[i].sum())
