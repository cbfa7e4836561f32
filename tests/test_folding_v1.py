"""Context folding on verl 0.9.1's real v1 path (as tests/test_v1_path.py): segments, masks, the fold's
messages, the reward copied to every segment, GRPO's advantage taken from the last segment and applied
through each segment's mask, and the 1/N segment weight.

One prompt, two sessions: the right one calls ``echo`` with a long text, which fills the context past
the fold trigger; it folds (summary), and its second segment answers "#### 4". The wrong one answers
"#### 5" at once (one segment). Stand-ins as in tests/trainer_harness.py: the LLM (scripted server).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import ray  # a hard dependency, imported: a broken install fails here rather than skip
import torch
import transfer_queue as tq  # the same

from extensions.folding import INSTRUCTION, carry_message
from extensions.testing.scripted_server import Alternatives, ScriptedServer
from extensions.token_text import truncate_to_tokens
from extensions.verl_compat import agent_loop_registry
from tests.conftest import PROMPT_LENGTH, RESPONSE_LENGTH
from tests.trainer_harness import LOOP_OUTPUTS, InProcessManager, RecordingWorkerTQ, tool_call, trainer_config

STEP = 2
LONG = " ".join(["alpha"] * 150)
SUMMARY = "<summary>I echoed the long text; nothing else is needed. The answer is 4.</summary>"
RIGHT = [tool_call("echo", text=LONG), SUMMARY, "It is 4.\n#### 4"]
WRONG = ["It is 5.\n#### 5"]
OBSERVATION_TOKENS = 24
EPS = 1e-6


def loop_entry(window: int) -> dict[str, Any]:
    return {
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "name": "fold_test",
        "tool_parser": "hermes_strict",
        "interaction_config_path": None,
        "fold": {
            "window_tokens": window,
            "trigger_fraction": 0.5,
            "max_segments": 3,
            "summary_max_tokens": 48,
            "observation_max_tokens": OBSERVATION_TOKENS,
        },
    }


def rows() -> list[dict[str, Any]]:
    return [
        {
            "raw_prompt": [
                {"role": "system", "content": "You are a careful solver."},
                {"role": "user", "content": "Q-fold"},
            ],
            "agent_name": "fold_test",
            "uid": "fold",
            "index": 0,
            "data_source": "openai/gsm8k",
            "reward_model": {"ground_truth": "4"},
            "extra_info": {"index": 0},
        }
    ]


@pytest.fixture(scope="module")
def v1(qwen_dir) -> Any:
    import verl.utils.tensordict_utils as tu
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from extensions.rollout.data import batch_from_rows

    config = trainer_config(qwen_dir, PROMPT_LENGTH, RESPONSE_LENGTH)
    config.algorithm.adv_estimator = "grpo"
    config.data.train_batch_size = 1
    config.reward.custom_reward_function.reward_kwargs = {}  # the outcome alone: right 1, wrong 0
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        trainer = PPOTrainerSync(config)
        trainer.global_steps = STEP
        trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)
        worker = RecordingWorkerTQ(config, llm_client=None)
        tok = worker.tokenizer
        # the trigger: half of a window just over the first prompt plus 100 tokens
        schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in worker.tools]
        text = tok.apply_chat_template(
            rows()[0]["raw_prompt"], tools=schemas, add_generation_prompt=True, tokenize=False
        )
        first = tok(text, add_special_tokens=False)["input_ids"]
        agent_loop_registry()["fold_test"] = loop_entry(window=2 * (len(first) + 100))
        worker.llm_client = ScriptedServer(tok, {"Q-fold": Alternatives(RIGHT, WRONG)}, global_steps=STEP)
        trainer.agent_loop_manager = InProcessManager(worker, config)
        LOOP_OUTPUTS.clear()
        batch = tu.get_tensordict(dict(batch_from_rows(rows()).non_tensor_batch))
        tu.assign_non_tensor_data(batch, "global_steps", STEP)
        trainer._submit_batch_to_rollout(batch)
        meta, _ = trainer.replay_buffer.sample(global_steps=STEP, partition_id="train", batch_size=1)
        metrics: dict[str, Any] = {}
        trainer._compute_old_log_prob(meta, metrics)
        trainer._compute_advantage(meta, metrics)
        fields = ["prompts", "responses", "response_mask", "rm_scores", "extra_fields", "advantages"]
        data = tq.kv_batch_get(keys=list(meta.keys), partition_id=meta.partition_id, select_fields=fields)
        # the advantage step again in verl's decoupled mode (bypass_mode=false): its rollout-correction step runs
        # on the segments too (old_log_probs are the rollout's here, as bypass mode put them)
        trainer.config.algorithm.rollout_correction.bypass_mode = False
        # the trainer's log-probs 0.5 below the engine's on the first row: a gap the step must measure
        keys, part = list(meta.keys), meta.partition_id
        old = tq.kv_batch_get(keys=keys, partition_id=part, select_fields=["old_log_probs"])
        rows_lp = [t.clone() for t in old["old_log_probs"].unbind()]
        rows_lp[0] = rows_lp[0] - 0.5
        old["old_log_probs"] = torch.nested.as_nested_tensor(rows_lp, layout=torch.jagged)
        tq.kv_batch_put(keys=keys, partition_id=part, fields=old)
        decoupled: dict[str, Any] = {}
        trainer._compute_advantage(meta, decoupled)
        again = tq.kv_batch_get(keys=keys, partition_id=part, select_fields=["advantages", "response_mask"])
        yield SimpleNamespace(
            keys=list(meta.keys), data=data, tok=tok, first=first, schemas=schemas, decoupled=decoupled, again=again
        )
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()


def sessions(v1: Any) -> tuple[str, str]:
    """(right session id, wrong session id): the right one folded into two segments."""
    by_session: dict[str, int] = {}
    for key in v1.keys:
        _, session, index = key.split("_")
        by_session[session] = max(by_session.get(session, 0), int(index) + 1)
    right = next(s for s, n in by_session.items() if n == 2)
    return right, next(s for s in by_session if s != right)


def row(v1: Any, key: str) -> dict[str, Any]:
    i = v1.keys.index(key)
    n = len(LOOP_OUTPUTS[key].response_ids)
    return {
        "prompt": v1.data["prompts"][i].tolist(),
        "response": v1.data["responses"][i].tolist()[:n],
        "mask": v1.data["response_mask"][i].tolist()[:n],
        "scores": v1.data["rm_scores"][i].tolist()[:n],
        "advantages": v1.data["advantages"][i].tolist()[:n],
        "extras": list(v1.data["extra_fields"])[i]["extras"],
    }


def enc(tok: Any, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def test_the_right_session_folds_into_two_segments_with_exact_tokens(v1) -> None:
    tok = v1.tok
    right, wrong = sessions(v1)
    assert sorted(v1.keys) == sorted([f"fold_{right}_0", f"fold_{right}_1", f"fold_{wrong}_0"])
    seg0, seg1 = row(v1, f"fold_{right}_0"), row(v1, f"fold_{right}_1")
    assert seg0["prompt"] == v1.first
    e0, e1 = seg0["extras"], seg1["extras"]
    assert (e0["termination_reason"], e0["segment"], e0["num_segments"], e0["fold_trigger"]) == (
        "folded",
        0,
        2,
        "context",
    )
    assert (e1["termination_reason"], e1["segment"], e1["num_segments"]) == ("final_answer", 1, 2)
    assert e0["summary_tokens"] == len(enc(tok, SUMMARY)) + 1  # the reply and its end token
    assert [t["role"] for t in e0["turns"]] == ["assistant", "tool", "user", "assistant"]
    call, result, instruction, summary = e0["turns"]
    assert instruction["fold"] is True and instruction["text"] == INSTRUCTION
    assert summary["summary"] is True and summary["summary_tagged"] is True
    for turn in e0["turns"]:  # the policy's tokens train, the context's do not
        lo, hi = turn["span"]
        assert seg0["mask"][lo:hi] == [int(turn["role"] == "assistant")] * (hi - lo)
    assert seg0["response"][slice(*summary["span"])] == enc(tok, SUMMARY) + [tok.convert_tokens_to_ids("<|im_end|>")]
    rendered = tok.decode(seg0["response"][slice(*instruction["span"])])
    assert INSTRUCTION in rendered and "<|im_start|>user" in rendered
    # the next segment: the sample's messages plus the summary and the last observation, cut to its cap
    observation = truncate_to_tokens(tok, f"echo: {LONG}", OBSERVATION_TOKENS)  # the tool result, cut
    assert observation.startswith("echo: alpha alpha") and len(observation) < len(LONG)
    content = carry_message(SUMMARY.removeprefix("<summary>").removesuffix("</summary>"), observation)["content"]
    head = tok.decode(v1.first).removesuffix("<|im_start|>assistant\n")
    assert tok.decode(seg1["prompt"]) == f"{head}<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
    assert e1["num_tool_calls"] == 1 and e1["turns"][0]["role"] == "assistant"
    # every token the policy wrote is trained in exactly one segment
    written = [t for seg in (seg0, seg1) for t, m in zip(seg["response"], seg["mask"], strict=True) if m]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert written == [t for reply in RIGHT for t in enc(tok, reply) + [end]]


def test_the_reward_is_copied_and_grpo_applies_the_last_segments_advantage_weighted_by_one_over_n(v1) -> None:
    right, wrong = sessions(v1)
    grpo = 0.5 / (torch.tensor([1.0, 0.0]).std().item() + EPS)  # group of the two final segments
    for key, score, advantage in (
        (f"fold_{right}_0", 1.0, grpo / 2),
        (f"fold_{right}_1", 1.0, grpo / 2),
        (f"fold_{wrong}_0", 0.0, -grpo),
    ):
        r = row(v1, key)
        assert r["scores"] == [0.0] * (len(r["response"]) - 1) + [score], key
        want = [advantage * m for m in r["mask"]]
        torch.testing.assert_close(torch.tensor(r["advantages"]), torch.tensor(want), rtol=0, atol=1e-6)


def test_decoupled_mode_measures_the_engine_trainer_gap_over_segments_and_keeps_the_advantages(v1) -> None:
    """``algorithm.rollout_correction.bypass_mode=false`` (the next GPU run's diagnostic): verl's rollout-correction
    step runs over the folded rows and logs ``rollout_corr/*``; with no IS weights or rejection it changes nothing."""
    # rollout_corr/kl = mean over response tokens of (rollout - old): 0.5 on the first row's tokens, 0 elsewhere
    masks = [v1.data["response_mask"][i] for i in range(len(v1.keys))]
    first, total = float(masks[0].sum()), float(sum(m.sum() for m in masks))
    assert v1.decoupled["rollout_corr/kl"] == pytest.approx(0.5 * first / total, rel=1e-5)
    assert v1.decoupled["rollout_corr/log_ppl_diff_max"] == pytest.approx(0.5, rel=1e-5)  # that row's mean gap
    assert [v1.again["response_mask"][i].tolist() for i in range(len(v1.keys))] == [m.tolist() for m in masks]
    rows = range(len(v1.keys))
    assert [v1.again["advantages"][i].tolist() for i in rows] == [v1.data["advantages"][i].tolist() for i in rows]
