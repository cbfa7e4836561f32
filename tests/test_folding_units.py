"""Context folding's pieces: settings, summary reading, the next segment's message, segment weights,
the estimator check, metrics, and the ledger's reward. The loop itself: tests/test_folding_v1.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from extensions.config_check import check_file
from extensions.custom_rewards import compute_score
from extensions.errors import ConfigError
from extensions.folding import carry_message, last_observation, parse_fold_settings, read_summary
from extensions.metrics import longflow_metrics
from extensions.segment_weights import check_segment_estimator, segment_weights, weigh_advantages


def test_fold_settings_name_the_entry_and_every_bad_key():
    assert parse_fold_settings(None, entry="f").max_segments == 4
    with pytest.raises(ConfigError) as err:
        parse_fold_settings({"trigger_fraction": 2, "bogus": 1}, entry="f")
    assert str(err.value) == (
        "agent loop 'f': fold: trigger_fraction: Input should be less than or equal to 1; "
        "bogus: Extra inputs are not permitted"
    )


def test_read_summary_takes_the_tagged_text_or_says_it_was_not_tagged():
    assert read_summary("I think.\n<summary> balance 120, next page 4 </summary> done") == (
        "balance 120, next page 4",
        True,
    )
    assert read_summary("<summary>balance 120, cut off") == ("balance 120, cut off", False)
    assert read_summary("  balance 120  ") == ("balance 120", False)
    # thinking is not the summary: the last non-empty one after it counts; a reply cut while thinking carries nothing
    assert read_summary("<think>use <summary></summary> tags</think><summary>total=42</summary>") == ("total=42", True)
    assert read_summary("<summary>old</summary> then <summary>new</summary>") == ("new", True)
    assert read_summary("<think>still thinking about <summary>x</summary>") == ("", False)
    # with the loop's summary_prefix in front: a repeated opening tag, or tags around nothing
    assert read_summary("<summary>\n<summary>facts</summary>") == ("facts", True)
    assert read_summary("<summary>\n</summary>") == ("", True)
    assert read_summary("<summary>\n") == ("", False)


def test_the_next_segment_carries_the_summary_and_the_last_observation():
    assert carry_message("b=1", None) == {
        "role": "user",
        "content": "Summary of your progress so far (your context was cleared):\n<summary>\nb=1\n</summary>"
        "\nContinue the task.",
    }
    assert carry_message("b=1", "page 3 text")["content"].endswith(
        "</summary>\nThe last message before the summary:\npage 3 text\nContinue the task."
    )
    turns = [
        {"role": "assistant", "content": "call"},
        {"role": "tool", "content": "page 3"},
        {"role": "assistant", "content": "cut"},
    ]
    assert last_observation(turns) == "page 3"
    assert last_observation([{"role": "assistant", "content": "x"}]) is None


def test_segments_of_a_folded_trajectory_weigh_one_over_n_other_rows_one():
    rows = [{"num_segments": 3}, {"num_segments": 3}, {"num_segments": 3}, {"num_segments": 1}, None, {"turns": []}]
    assert segment_weights(rows, "inverse_count").tolist() == pytest.approx([1 / 3] * 3 + [1.0, 1.0, 1.0])
    assert segment_weights(rows, "none").tolist() == [1.0] * 6
    data = SimpleNamespace(batch={"advantages": torch.ones(6, 2), "returns": torch.full((6, 2), 2.0)})
    weigh_advantages(data, rows, {"adv_estimator": "grpo"})
    assert data.batch["advantages"][:, 0].tolist() == pytest.approx([1 / 3] * 3 + [1.0] * 3)
    assert data.batch["returns"][0].tolist() == pytest.approx([2 / 3, 2 / 3])
    with pytest.raises(ConfigError, match=r"algorithm.segment_weight='half' is not valid; choose one of"):
        weigh_advantages(data, rows, {"adv_estimator": "grpo", "segment_weight": "half"})


def test_folded_trajectories_train_with_grpo_only():
    with pytest.raises(ConfigError) as err:
        check_segment_estimator({"adv_estimator": "turn_grpo"})
    assert str(err.value).startswith(
        "algorithm.adv_estimator='turn_grpo' cannot train folded trajectories (a folding loop such as folding_workflow)"
    )
    data = SimpleNamespace(batch={"advantages": torch.ones(2, 2)})
    with pytest.raises(ConfigError):
        weigh_advantages(data, [{"num_segments": 2}, {"num_segments": 2}], {"adv_estimator": "turn_grpo"})
    weigh_advantages(data, [{"num_segments": 1}], {"adv_estimator": "turn_grpo"})  # nothing folded: fine


def test_config_check_rejects_a_folding_default_loop_with_another_estimator(tmp_path):
    exp = tmp_path / "experiments" / "fold"
    exp.mkdir(parents=True)
    (exp / "config.yaml").write_text(
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "algorithm: {adv_estimator: turn_grpo}\n"
        "actor_rollout_ref: {model: {override_config: {attn_implementation: sdpa}},"
        " rollout: {agent: {default_agent_loop: folding_workflow}}}\n"
    )
    (problem,) = check_file(exp / "config.yaml")
    assert problem.startswith(f"{exp / 'config.yaml'}: algorithm.adv_estimator='turn_grpo' cannot train folded")


def test_metrics_count_each_folded_trajectory_once_from_its_last_segment():
    def seg(i, n, reason, **more):
        return {"segment": i, "num_segments": n, "termination_reason": reason, "num_tool_calls": 2 * (i + 1), **more}

    rows = [
        seg(0, 2, "folded", fold_trigger="context", summary_tokens=40),
        seg(1, 2, "final_answer"),
        seg(0, 1, "final_answer"),
        seg(0, 3, "folded", fold_trigger="tool", summary_tokens=20),
        seg(1, 3, "folded", fold_trigger="budget", summary_tokens=30),
        seg(2, 3, "final_answer"),
        {"termination_reason": "final_answer", "num_tool_calls": 1},  # an unfolded loop's row
    ]
    m = longflow_metrics(rows)
    assert m["longflow/recorded_fraction"] == 1.0
    assert m["longflow/termination/final_answer"] == 1.0 and m["longflow/termination/folded"] == 0.0
    assert m["longflow/tool_calls/mean"] == pytest.approx((4 + 2 + 6 + 1) / 4)
    assert (m["longflow/segments/mean"], m["longflow/segments/max"]) == (2.0, 3.0)
    assert m["longflow/summary_tokens/mean"] == 30.0
    folds = (m["longflow/folds/context"], m["longflow/folds/budget"], m["longflow/folds/tool"])
    assert folds == (1 / 3, 1 / 3, 1 / 3)


def test_the_ledger_answer_is_scored_and_max_segments_pays_the_budget_penalty():
    extras = {"termination_reason": "max_segments", "final_answer_text": "#### 1268"}
    score = compute_score("longflow/ledger", "", "1268", {"extras": extras}, budget_penalty=0.25)
    assert (score["acc"], score["termination_penalty"], score["score"]) == (1.0, 0.25, 0.75)


def test_a_fold_reserve_that_leaves_no_room_for_a_turn_is_a_config_error(qwen_dir):
    from hydra.errors import InstantiationException

    from extensions.verl_compat import agent_loop_registry
    from tests.conftest import FIXTURES, PACK_LOOPS, build_worker, make_batch, sample

    worker = build_worker(qwen_dir, tools=FIXTURES / "tools.yaml", agent_loops=PACK_LOOPS, tool_format="hermes")
    agent_loop_registry()["fold_tiny"] = {
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "name": "fold_tiny",
        "fold": {"summary_max_tokens": 3060},
    }
    with pytest.raises(InstantiationException, match=r"agent loop 'fold_tiny': fold: the fold reserves \d+ response"):
        import asyncio

        asyncio.run(worker.generate_sequences(make_batch([sample("X", "fold_tiny")])))
