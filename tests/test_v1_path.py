"""The pack's loop outputs through verl 0.9.1's v1 trainer path on CPU, with a real TransferQueue.

The mixed batch of tests/trainer_harness.py (``long_workflow`` with a tool round, a user turn and a
malformed call; stock ``tool_agent`` and ``single_turn_agent``; a loop returning a LIST of outputs),
``rollout.n=2``, goes through verl's own pieces: ``PPOTrainer._submit_batch_to_rollout`` →
``AgentLoopWorkerTQ`` (the actor's class, in-process) → ``RewardLoopWorker`` with the pack's
``compute_score`` → ``_agent_loop_postprocess`` → TransferQueue → the trainer's
``ReplayBuffer.sample`` → ``_compute_old_log_prob`` (bypass mode) → the pack-hooked
``_compute_advantage`` (``algorithm.adv_estimator=turn_grpo``) and ``_compute_metrics``, and the
hooked ``_val_metrics_update``. Stand-ins: the LLM (a scripted server) and the GPU worker groups,
which this path never calls.

Run: ``PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_v1_path.py`` (1-2 minutes on 2 cores;
Ray and TransferQueue start once for the module and stop at its end).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import ray  # a hard dependency, imported: a broken install fails here rather than skip
import torch
import transfer_queue as tq  # the same
from verl.trainer.ppo import core_algos

from extensions import custom_advantages as ca
from extensions.custom_rewards import compute_score
from extensions.metrics import longflow_metrics, validation_metrics
from extensions.testing.scripted_server import ScriptedServer
from extensions.verl_compat import last_sample_returned_at
from tests.conftest import PROMPT_LENGTH, RESPONSE_LENGTH
from tests.trainer_harness import (
    CASES,
    LOOP_OUTPUTS,
    InProcessManager,
    RecordingWorkerTQ,
    W,
    is_right,
    register_test_loops,
    sample_rows,
    script,
    trainer_config,
)

STEP = 3
UIDS = list(CASES)
EPS = 1e-6
# uid -> (score of the right session, score of the wrong one), by hand from custom_rewards.compute_score:
#   long:   1 + 0.5*mean(0.5, 0.5) + 0.25*mean(2.0)  |  0 + 0.5*mean(0.5, 0.5) - 0.125*1 malformed call
#   tool:   1 + 0.25*mean(2.0) (echo's reward is len("yo"))  |  0
#   list:   1 + 0.5*0.5 + 0.25*2.0  |  0 + 0.5*0.5
SCORES = {"long": (1.75, 0.125), "tool": (1.5, 0.0), "single": (1.0, 0.0), "list": (1.75, 0.25)}
# per-turn process rewards r_k (extensions/rewards/turns.py) of the long_workflow sessions
TURN_REWARDS = {"long": ([0.5, 0.125, 0.125], [-0.125, 0.125, 0.125]), "list": ([0.5, 0.25], [0.25])}


@pytest.fixture(scope="module")
def v1(qwen_dir) -> Any:
    """Ray + TransferQueue, verl's sync trainer, one rollout of the mixed batch, the replay buffer's sample."""
    import verl.utils.tensordict_utils as tu
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from extensions.rollout.data import batch_from_rows

    config = trainer_config(qwen_dir, PROMPT_LENGTH, RESPONSE_LENGTH)
    register_test_loops()
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)  # logical CPUs: tq.init asks for 3
    try:
        tq.init()
        trainer = PPOTrainerSync(config)  # __init__ builds the replay buffer; init() (GPU workers) is not called
        trainer.global_steps = STEP
        trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)  # throughput metrics only
        worker = RecordingWorkerTQ(config, llm_client=None)
        worker.llm_client = ScriptedServer(worker.tokenizer, script(UIDS), global_steps=STEP)
        trainer.agent_loop_manager = InProcessManager(worker, config)
        LOOP_OUTPUTS.clear()
        batch = tu.get_tensordict(dict(batch_from_rows(sample_rows(UIDS)).non_tensor_batch))
        tu.assign_non_tensor_data(batch, "global_steps", STEP)
        trainer._submit_batch_to_rollout(batch)
        meta, _ = trainer.replay_buffer.sample(global_steps=STEP, partition_id="train", batch_size=len(UIDS))
        yield SimpleNamespace(trainer=trainer, meta=meta, tokenizer=worker.tokenizer, config=config)
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()


def fetch(v1: Any, *fields: str) -> Any:
    return tq.kv_batch_get(keys=list(v1.meta.keys), partition_id=v1.meta.partition_id, select_fields=list(fields))


def right_sessions(v1: Any) -> dict[str, bool]:
    """``{uid}_{session}`` -> whether that session took the right script (from its final output's text)."""
    finals = {}
    for key, output in LOOP_OUTPUTS.items():
        session, index = key.rsplit("_", 1)
        if int(index) >= finals.get(session, (-1, None))[0]:
            finals[session] = (int(index), output)
    return {
        session: is_right(session.split("_")[0], v1.tokenizer.decode(output.response_ids))
        for session, (_, output) in finals.items()
    }


def test_every_output_arrives_intact(v1) -> None:
    keys = list(v1.meta.keys)
    expected_keys = [f"{uid}_{s}_0" for uid in UIDS for s in (0, 1)] + ["list_0_1", "list_1_1"]
    assert sorted(keys) == sorted(LOOP_OUTPUTS) == sorted(expected_keys)
    right = right_sessions(v1)
    assert sorted(right.values()) == [False] * 4 + [True] * 4  # each prompt: one right, one wrong session
    data = fetch(
        v1, "prompts", "responses", "response_mask", "rollout_log_probs", "rm_scores", "extra_fields", "num_turns"
    )
    extra_fields, num_turns = list(data["extra_fields"]), list(data["num_turns"])
    for i, (key, tag) in enumerate(zip(keys, v1.meta.tags, strict=True)):
        out = LOOP_OUTPUTS[key]
        uid, session, index = key.split("_")
        # tokens, masks, log-probs: exactly the loop's
        assert data["prompts"][i].tolist() == out.prompt_ids
        assert data["responses"][i].tolist() == out.response_ids
        assert data["response_mask"][i].tolist() == out.response_mask
        assert torch.equal(data["rollout_log_probs"][i], torch.tensor(out.response_logprobs, dtype=torch.float32))
        assert num_turns[i] == out.num_turns
        assert tag == {
            "status": "success",
            "prompt_len": len(out.prompt_ids),
            "response_len": len(out.response_ids),
            "seq_len": len(out.prompt_ids) + len(out.response_ids),
            "global_steps": STEP,
            "min_global_steps": STEP,
            "max_global_steps": STEP,
        }
        # extra_fields: the loop's (extras, turn_scores, tool_rewards, ...) plus verl's reward info, nothing lost
        fields = extra_fields[i]
        reward_info = fields.pop("reward_extra_info")
        assert fields == out.extra_fields
        if CASES[uid][0] in ("tool_agent", "single_turn_agent"):
            assert "extras" not in fields
        else:
            assert fields["extras"]["termination_reason"] == "interaction_done"
        # the reward: the pack's compute_score on the session's final output, on the last token
        final = LOOP_OUTPUTS[f"{uid}_{session}_{1 if uid == 'list' else 0}"]
        want = compute_score(
            "openai/gsm8k",
            v1.tokenizer.decode(final.response_ids, skip_special_tokens=True),
            CASES[uid][1],
            {**final.extra_fields, "index": UIDS.index(uid)},
            **W,
        )
        score = SCORES[uid][0 if right[f"{uid}_{session}"] else 1]
        assert reward_info == want and want["score"] == score
        assert data["rm_scores"][i].tolist() == [0.0] * (len(out.response_ids) - 1) + [score]


def test_turn_records_rewards_and_masks_of_long_workflow(v1) -> None:
    right = right_sessions(v1)
    data = fetch(v1, "response_mask", "extra_fields")
    for i, key in enumerate(v1.meta.keys):
        uid, session, index = key.split("_")
        if uid not in TURN_REWARDS:
            continue
        extras = list(data["extra_fields"])[i]["extras"]
        rewards = TURN_REWARDS[uid][0 if right[f"{uid}_{session}"] else 1]
        assistant = [t for t in extras["turns"] if t["role"] == "assistant"]
        outcome = float(right[f"{uid}_{session}"])
        assert sum(rewards) + outcome == SCORES[uid][0 if right[f"{uid}_{session}"] else 1]
        if uid == "list" and index == "0":
            rewards = rewards[:1]  # the first output keeps only its first assistant turn
        assert [t["reward"] for t in assistant] == rewards
        mask = data["response_mask"][i].tolist()
        assert sum(t["span"][1] - t["span"][0] for t in extras["turns"]) == len(mask)
        for turn in extras["turns"]:
            lo, hi = turn["span"]
            assert mask[lo:hi] == [int(turn["role"] == "assistant")] * (hi - lo)


@pytest.fixture(scope="module")
def advantages(v1) -> Any:
    """verl's old-log-prob step (bypass) and the hooked advantage step, once; the estimator's log kept."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("extensions.turn_credit")
    logger.addHandler(handler)
    try:
        metrics: dict[str, Any] = {}
        v1.trainer._compute_old_log_prob(v1.meta, metrics)
        v1.trainer._compute_advantage(v1.meta, metrics)
        stats = dict(ca.LAST_STATS)
    finally:
        logger.removeHandler(handler)
    return SimpleNamespace(metrics=metrics, stats=stats, log=[r.getMessage() for r in records])


def padded(nested: torch.Tensor) -> torch.Tensor:
    return nested.to_padded_tensor(0.0) if nested.is_nested else nested


def z(values: list[float]) -> list[float]:
    """verl's GRPO normalisation of hand-computed returns."""
    g = torch.tensor(values)
    return ((g - g.mean()) / (g.std() + EPS)).tolist()


def test_turn_grpo_through_the_hooked_v1_advantage_step(v1, advantages) -> None:
    keys = list(v1.meta.keys)
    data = fetch(v1, "advantages", "returns", "rm_scores", "response_mask", "extra_fields", "uid")
    adv, mask, scores = padded(data["advantages"]), padded(data["response_mask"]), padded(data["rm_scores"])
    rows = [fields.get("extras") for fields in data["extra_fields"]]
    uids = np.array(list(data["uid"]), dtype=object)
    # exactly the pure core on the same inputs (gamma 1, std-normalised: verl's defaults)
    expected, stats = ca.turn_level_advantages(scores, mask, uids, rows, gamma=1.0, norm_by_std=True)
    assert torch.equal(adv, expected) and torch.equal(padded(data["returns"]), expected)
    assert advantages.stats == stats
    assert stats["fallback_rows"] == 4 and stats["fallback_reasons"] == {"no_records": 4}
    assert advantages.log == [
        "turn_grpo: 4 of 10 rows have no usable per-turn records (no_records: 4); they use the outcome (GRPO) advantage"
    ]
    assert torch.equal(adv[mask == 0], torch.zeros(int((mask == 0).sum())))
    # tool_agent / single_turn_agent rows: verl's own GRPO of their group
    stock = [i for i, k in enumerate(keys) if k.split("_")[0] in ("tool", "single")]
    grpo, _ = core_algos.compute_grpo_outcome_advantage(scores[stock], mask[stock], uids[stock])
    assert torch.equal(adv[stock], grpo)
    # long_workflow by hand: G_k = S - sum_{j<k} r_j; right 1.75, 1.25, 1.125; wrong 0.125, 0.25, 0.125
    right = right_sessions(v1)
    returns = {True: [1.75, 1.25, 1.125], False: [0.125, 0.25, 0.125]}
    for i, key in enumerate(keys):
        uid, session, _ = key.split("_")
        if uid != "long":
            continue
        ok = right[f"{uid}_{session}"]
        turns = [t for t in rows[i]["turns"] if t["role"] == "assistant"]
        for k, turn in enumerate(turns):
            # turn 1: GRPO; later turns: G_k minus the group's G_k summed over N = 2, over the std of
            # every return of the group (both rows reach all three turns)
            pair, pooled = (
                torch.tensor([returns[ok][k], returns[not ok][k]]),
                torch.tensor(returns[True] + returns[False]),
            )
            value = z([returns[ok][k], returns[not ok][k]])[0]
            if k:
                value = ((pair[0] - pair.sum() / 2) / (pooled.std() + EPS)).item()
            lo, hi = turn["span"]
            assert adv[i, lo:hi].tolist() == pytest.approx([value] * (hi - lo), rel=1e-6)
    # the list loop's group: G_1 = 1.75 (right, both outputs) and 0.25 (wrong, both); only the right
    # final output reaches turn 2, where the baseline is its own G_2 over N = 4 (the others add 0)
    a_right, _, a_wrong, _ = z([1.75, 1.75, 0.25, 0.25])
    for i, key in enumerate(keys):
        uid, session, _ = key.split("_")
        if uid == "list":
            value = a_right if right[f"{uid}_{session}"] else a_wrong
            values = adv[i][mask[i] == 1].tolist()
            assert values[0] == value  # every row's turn 1
            if len(set(values)) > 1:  # the right final output's turn 2
                turns = [t for t in rows[i]["turns"] if t["role"] == "assistant"]
                lo, hi = turns[1]["span"]
                g2 = padded(data["rm_scores"])[i].sum() - turns[0]["reward"]
                std = torch.tensor([1.75, 0.0, 1.75, float(g2), 0.25, 0.0, 0.25, 0.0]).std()  # zero-padded returns
                assert adv[i, lo:hi].tolist() == pytest.approx([((g2 - g2 / 4) / (std + EPS)).item()] * (hi - lo))


def test_compute_metrics_hook_adds_longflow_keys(v1, advantages) -> None:
    metrics: dict[str, Any] = {}
    v1.trainer._compute_metrics(v1.meta, metrics, {"step": 1.0, "gen": 0.5}, STEP, 0)
    ours = {k: v for k, v in metrics.items() if k.startswith("longflow/")}
    rows = [f.get("extras") for f in fetch(v1, "extra_fields")["extra_fields"]]
    assert ours.pop("longflow/actor_optimizer_steps") == 1.0  # 10 rows, verl's default 256 x n=2 rows a step
    assert ours.pop("longflow/batch/padding_rows") == 0.0  # the fixture's batch is not upsampled
    sampled_at = last_sample_returned_at()  # the fixture's real ReplayBuffer.sample, timed by the hook
    assert ours == longflow_metrics(rows, sampled_at=sampled_at)
    finished = max(row["finished_at"] for row in rows if row is not None)
    assert ours["longflow/rollout/take_lag_s"] == sampled_at - finished >= 0
    # 6 of 10 rows recorded: long x2 (3 assistant turns), list x2 sessions x2 outputs (2 and 1 turns)
    assert ours["longflow/recorded_fraction"] == 0.6
    assert ours["longflow/termination/interaction_done"] == 1.0
    assert ours["longflow/assistant_turns/mean"] == 2.0 and ours["longflow/assistant_turns/max"] == 3.0
    assert ours["longflow/tool_calls/mean"] == pytest.approx(3 / 6)
    assert ours["longflow/malformed_calls/mean"] == pytest.approx(1 / 6)
    assert ours["longflow/tool_rounds/mean"] == pytest.approx(4 / 6)
    scores = [sum(s.tolist()) for s in fetch(v1, "rm_scores")["rm_scores"]]
    assert metrics["critic/score/mean"] == pytest.approx(np.mean(scores))  # verl's own metrics ran too
    assert metrics["training/global_step"] == STEP


def test_actor_optimizer_steps_count_rows_not_trajectories(v1, advantages, caplog) -> None:
    """One optimizer step per ppo_mini_batch_size x n ROWS, times ppo_epochs: the 10 rows of 8 sessions (one
    LIST loop's sessions are 2 rows each) at 2 x 2 rows a step are 3 mini-batches, 6 steps over 2 epochs; the 8
    sessions alone would be 2 mini-batches, 4 steps, so the trainer is warned, once."""
    from omegaconf import open_dict

    from extensions.verl_compat import trainer_hooks

    actor = v1.trainer.config.actor_rollout_ref.actor
    before = (actor.ppo_mini_batch_size, actor.ppo_epochs)
    trainer_hooks._WARNED["optimizer_steps"] = False
    try:
        with open_dict(actor):
            actor.ppo_mini_batch_size, actor.ppo_epochs = 2, 2
        steps = []
        for _ in range(2):
            metrics: dict[str, Any] = {}
            with caplog.at_level(logging.WARNING, logger=trainer_hooks.__name__):
                v1.trainer._compute_metrics(v1.meta, metrics, {"step": 1.0, "gen": 0.5}, STEP, 0)
            steps.append(metrics["longflow/actor_optimizer_steps"])
    finally:
        with open_dict(actor):
            actor.ppo_mini_batch_size, actor.ppo_epochs = before
    assert len(v1.meta.keys) == 10
    assert steps == [6.0, 6.0]
    warnings = [r.getMessage() for r in caplog.records if "optimizer steps" in r.getMessage()]
    assert warnings == [
        "verl-longflow: 8 trajectories came as 10 rows (a folded trajectory is a row per segment), so the actor "
        "takes 6 optimizer steps this training step instead of 4 (one per ppo_mini_batch_size=2 x rollout.n=2 "
        "rows, x ppo_epochs=2). Each step moves the weights, on rows of zero advantage too (AdamW's momentum). "
        "For one per training step set +trainer.v1.whole_batch_update=true, or "
        "actor_rollout_ref.actor.ppo_mini_batch_size to data.train_batch_size x "
        "the loop's fold.max_segments (docs/results/ledger-fold-grpo30-mb96-h100); verl then pads each batch to "
        "a multiple of ppo_mini_batch_size x rollout.n rows with no-op rows, which cost driver time, and actor time "
        "at verl's 128 tokens a row (trainer.v1.padding_row_tokens; longflow/batch/padding_rows). "
        "longflow/actor_optimizer_steps logs the count every step."
    ]


def test_val_metrics_hook_adds_longflow_val_keys(v1) -> None:
    # what PPOTrainer._validate collects: each session's final output's reward extra info
    finals: dict[str, int] = {}
    for i, key in enumerate(v1.meta.keys):
        session, index = key.rsplit("_", 1)
        if int(index) >= int(v1.meta.keys[finals.get(session, i)].rsplit("_", 1)[1]):
            finals[session] = i
    data = fetch(v1, "extra_fields", "uid", "num_turns")
    infos: dict[str, list[Any]] = defaultdict(list)
    for i in finals.values():
        for name, value in list(data["extra_fields"])[i]["reward_extra_info"].items():
            infos[name].append(value)
    uids = [list(data["uid"])[i] for i in finals.values()]
    turns = [list(data["num_turns"])[i] for i in finals.values()]
    metrics = v1.trainer._val_metrics_update(["openai/gsm8k"] * len(uids), uids, dict(infos), turns)
    ours = {k: v for k, v in metrics.items() if k.startswith("longflow/val/")}
    assert ours == validation_metrics(infos)
    # 8 sessions: 4 long_workflow-style (long, list) end with interaction_done; the 4 stock ones have no records
    assert ours["longflow/val/termination/interaction_done"] == 0.5
    assert ours["longflow/val/assistant_turns/mean"] == pytest.approx((3 + 3 + 2 + 1) / 8)
    assert ours["longflow/val/malformed_calls/mean"] == pytest.approx(1 / 8)
    assert metrics["val-core/openai/gsm8k/acc/mean@2"] == 0.5  # verl's own, from the same infos


def test_val_metrics_of_a_labelled_data_source_are_reported_apart(v1) -> None:
    """A baseline's rows beside the trained loop's in one validation set (data_source longflow/ledger@truncated):
    verl and the longflow/val metrics measure each source alone."""
    data = fetch(v1, "extra_fields", "uid")
    infos: dict[str, list[Any]] = defaultdict(list)
    for extra in data["extra_fields"]:
        for name, value in extra["reward_extra_info"].items():
            infos[name].append(value)
    uids, n = list(data["uid"]), len(data["uid"])
    sources = ["longflow/ledger" if i % 2 else "longflow/ledger@truncated" for i in range(n)]
    metrics = v1.trainer._val_metrics_update(sources, uids, dict(infos), [])
    halves = {
        label: {k: [v[i] for i in range(n) if (i % 2 == 0) == (label == "@truncated")] for k, v in infos.items()}
        for label in ("", "@truncated")
    }
    assert {k: v for k, v in metrics.items() if k.startswith("longflow/val/")} == validation_metrics(halves[""])
    truncated = {k: v for k, v in metrics.items() if k.startswith("longflow/val@truncated/")}
    assert truncated == {
        k.replace("longflow/val/", "longflow/val@truncated/"): v
        for k, v in validation_metrics(halves["@truncated"]).items()
    }
    assert truncated and not any(k.startswith("longflow/val/") and "@" in k for k in metrics)
    assert {k.split("/acc/")[0] for k in metrics if k.startswith("val-core/")} == {
        "val-core/longflow/ledger",
        "val-core/longflow/ledger@truncated",
    }


def test_padding_rows_are_counted_and_never_read_as_trajectories(v1, monkeypatch) -> None:
    """verl's real upsampling pads the 10 rows to 16 with deep copies of the first row (its records included),
    and balancing interleaves them: longflow/batch/padding_rows counts 6, and the advantage rows are the unpadded
    batch's, in the batch's order, None for each padding row, read without the copies."""
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size

    from extensions.verl_compat import trainer_hooks

    unpadded = dict(zip(v1.meta.keys, trainer_hooks._v1_advantage_rows(v1.meta), strict=True))
    padded = upsample_batch_to_divisible_size(v1.meta, 16, v1.tokenizer.eos_token_id)
    try:
        padded.reorder([i for pair in zip(range(10, 16), range(6), strict=True) for i in pair] + list(range(6, 10)))
        assert [tag.get("is_padding", False) for tag in padded.tags] == [True, False] * 6 + [False] * 4
        metrics = trainer_hooks.actor_optimizer_steps(v1.trainer, padded)
        assert metrics == {"longflow/batch/padding_rows": 6.0, "longflow/actor_optimizer_steps": 1.0}
        asked: list[list[str]] = []
        get = tq.kv_batch_get
        monkeypatch.setattr(tq, "kv_batch_get", lambda keys, **kw: asked.append(list(keys)) or get(keys=keys, **kw))
        rows = trainer_hooks._v1_advantage_rows(padded)
        assert rows == [unpadded.get(key) for key in padded.keys]
        assert asked == [[key for key in padded.keys if key in unpadded]]
    finally:
        tq.kv_clear(keys=[k for k in padded.keys if k not in unpadded], partition_id=padded.partition_id)
