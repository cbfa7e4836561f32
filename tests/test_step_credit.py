"""Steps inside a code-fence turn: each executed block cuts the assistant turn, its execution bonus is
that step's process reward, and the turn-level estimators credit the steps.

Through verl's real AgentLoopWorker, the real sandbox and a scripted server (as tests/test_code_fence_loop.py),
with the pack's reward settings on the trainer config; then the estimators' pure cores on those records.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from extensions.code_fence import output_block
from extensions.custom_rewards import compute_score
from extensions.episode import context_anchor
from extensions.rewards.settings import RewardSettings
from extensions.rewards.turns import step_rewards
from extensions.turn_credit import AssistantTurn, parse_turns, turn_level_advantages
from tests.conftest import ROOT, Row, build_worker, register_loop, run_batch, sample

TOOLS = ROOT / "experiments" / "gsm8k_learn" / "tools.yaml"
LOOPS = ROOT / "experiments" / "gsm8k_learn" / "agent_loops.yaml"
REWARD = [
    "reward.custom_reward_function.path=pkg://extensions.custom_rewards",
    "reward.custom_reward_function.name=compute_score",
    "+reward.custom_reward_function.reward_kwargs={mode: flexible, w_exec: 0.1, exec_bonus_cap: 0.15}",
]
EPS = 1e-6


@pytest.fixture(scope="module")
def paid_worker(qwen_dir: Any) -> Any:
    return build_worker(qwen_dir, tools=TOOLS, agent_loops=LOOPS, tool_format="auto", overrides=REWARD)


def enc(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


async def test_a_turn_with_three_blocks_is_four_steps_each_paid_for_its_own_block(paid_worker):
    tok = paid_worker.tokenizer
    loop = register_loop("steps_three", tool_parser="code_fence", interaction_config_path=None)
    first = "6 people pay 7:\n```python\nprint(6 * 7)\n```\n"
    second = "Check a ratio:\n```python\nprint(1 / 0)\n```\n"
    third = "Add the fee:\n```python\nprint(42 + 1)\n```\n"
    last = "The total is 43.\n#### 43"
    out = await run_batch(paid_worker, {"ST-three": [first, second, third, last]}, [sample("ST-three", loop)])
    row = Row(out, 0)
    outputs = [output_block("42", after=first), None, output_block("43", after=third)]
    (turn,) = row.extras["turns"]
    calls = turn["code_calls"]
    assert [c["succeeded"] for c in calls] == [True, False, True]
    # the bonus is paid call by call until the cap: 0.1, nothing for the error, the 0.05 left of 0.15
    assert turn["step_rewards"] == [0.1, 0.0, pytest.approx(0.05, abs=1e-12), 0.0]
    assert turn["reward"] == sum(turn["step_rewards"])

    steps, reason = parse_turns(row.extras, len(row.response_ids))
    assert reason is None
    cuts = [(0, calls[0]["span"][0])]
    cuts += [(calls[j - 1]["span"][1], calls[j]["span"][0]) for j in (1, 2)]
    cuts += [(calls[2]["span"][1], len(row.response_ids))]
    assert [(s.start, s.end) for s in steps] == cuts
    # each step is exactly what the policy wrote (mask 1), the outputs between them are not steps
    texts = [first, second, third, last]
    for (lo, hi), text in zip(cuts, texts, strict=True):
        assert row.response_ids[lo:hi][: len(enc(tok, text))] == enc(tok, text)
        assert set(row.mask[lo:hi]) == {1}
    lo, hi = calls[0]["span"]
    assert tok.decode(row.response_ids[lo:hi]) == outputs[0] and set(row.mask[lo:hi]) == {0}
    # anchors: the turn's context, then the context right after each block's output
    assert steps[0].anchor == turn["anchor"] == context_anchor(row.prompt_ids)
    for step, call in zip(steps[1:], calls, strict=True):
        assert step.anchor == call["anchor"] == context_anchor(row.prompt_ids + row.response_ids[: call["span"][1]])
    assert [s.reward for s in steps] == turn["step_rewards"]

    # the steps' rewards are exactly the score's execution bonus; the rest is the outcome
    info = {"extras": row.extras, "turn_scores": row.turn_scores, "tool_rewards": row.tool_rewards}
    score = compute_score("longflow/gsm8k", "", "43", info, mode="flexible", w_exec=0.1, exec_bonus_cap=0.15)
    assert score["score"] == pytest.approx(1.15, abs=1e-12) and score["exec_bonus"] == pytest.approx(0.15)
    assert score["score"] - sum(turn["step_rewards"]) == pytest.approx(1.0, abs=1e-12)


def _call(succeeded: bool, reward: float | None = None) -> dict[str, Any]:
    return {"succeeded": succeeded, "reward": reward}


def test_step_rewards_keep_user_scores_tool_rounds_and_penalties_on_the_turns_last_step():
    settings = RewardSettings(w_turn=0.5, w_tool=0.2, w_format=0.1, w_exec=0.1, exec_bonus_cap=0.25)
    turns = [
        {"role": "assistant", "code_calls": [_call(True, 1.0), _call(False, 0.0)], "malformed_tool_calls": ["x"]},
        {"role": "tool", "tool_calls": [_call(True, 1.0)]},
        {"role": "assistant"},
        {"role": "user", "score": 1.0},
        {"role": "assistant", "code_calls": [_call(True)]},
    ]
    # 3 tool rewards (w_tool/3 each), 1 user score; bonus 0.1 + 0.1 + 0.05 (cap 0.25) in call order
    assert step_rewards(turns, settings) == [
        [pytest.approx(0.2 / 3 + 0.1), 0.0, pytest.approx(-0.1 + 0.2 / 3 + 0.1)],
        [pytest.approx(0.5)],
        [pytest.approx(0.05), 0.0],
    ]
    conditional = RewardSettings(w_exec=0.1, exec_bonus_cap=0.25, exec_bonus_if_correct=True)
    assert step_rewards(turns, conditional) == [[0.0, 0.0, 0.0], [0.0], [0.0, 0.0]]  # it is part of the outcome


def extras_of(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"turns": list(turns)}


def test_parse_turns_cuts_at_inline_outputs_and_puts_a_reward_without_steps_on_the_last_step():
    calls = [{"span": [3, 5], "anchor": "b"}, {"span": [7, 7], "anchor": "c"}]
    turn = {"role": "assistant", "span": [0, 10], "reward": 0.3, "anchor": "a", "code_calls": calls}
    steps, reason = parse_turns(extras_of(turn), 12)
    assert reason is None
    assert steps == [AssistantTurn(0, 3, 0.0, "a"), AssistantTurn(5, 7, 0.0, "b"), AssistantTurn(7, 10, 0.3, "c")]
    steps, _ = parse_turns(extras_of({**turn, "step_rewards": [0.1, 0.2, 0.0]}), 12)
    assert [s.reward for s in steps] == [0.1, 0.2, 0.0]
    assert parse_turns(extras_of({**turn, "step_rewards": [0.1, 0.2]}), 12) == (None, "bad_reward")
    bad = [{"span": [3, 5]}, {"span": [4, 8]}]  # overlapping outputs
    assert parse_turns(extras_of({**turn, "code_calls": bad}), 12) == (None, "bad_span")
    assert parse_turns(extras_of({**turn, "code_calls": [{"span": [3, 11]}]}), 12) == (None, "bad_span")


def test_turn_grpo_credits_each_step_with_the_group_baseline_over_all_rows():
    # two rows of one group, 12 tokens each: row 0 wrote two blocks (3 steps), row 1 none (1 step)
    row0 = {
        "role": "assistant",
        "span": [0, 12],
        "reward": 0.2,
        "step_rewards": [0.1, 0.1, 0.0],
        "code_calls": [{"span": [2, 4]}, {"span": [6, 8]}],
    }
    row1 = {"role": "assistant", "span": [0, 12], "reward": 0.0}
    mask = torch.ones(2, 12)
    mask[0, 2:4] = mask[0, 6:8] = 0
    scores = torch.zeros(2, 12)
    scores[0, 11], scores[1, 11] = 1.2, 1.0  # both right; row 0 earned the 0.2 execution bonus
    adv, stats = turn_level_advantages(scores, mask, ["u", "u"], [extras_of(row0), extras_of(row1)])
    assert stats["assistant_turns"] == 4 and stats["fallback_rows"] == 0
    first = ((torch.tensor([1.2, 1.0]) - 1.1) / (torch.tensor([1.2, 1.0]).std() + EPS)).tolist()
    g2, g3 = 1.2 - 0.1, 1.2 - 0.2  # G_k = S - rewards of earlier steps; only row 0 reaches steps 2, 3
    pooled = torch.tensor([1.2, g2, g3, 1.0, 0.0, 0.0]).std()  # both rows' returns, zero-padded to 3 steps
    expected = torch.zeros(2, 12)
    expected[0, 0:2] = first[0]
    expected[0, 4:6] = (g2 - g2 / 2) / (pooled + EPS)
    expected[0, 8:12] = (g3 - g3 / 2) / (pooled + EPS)
    expected[1, :] = first[1]
    torch.testing.assert_close(adv, expected, rtol=0, atol=1e-6)


def test_a_group_with_one_score_gets_bounded_step_advantages():
    """All rows right with the same score (GRPO's std is 0): the later steps' advantages stay of the order
    of the returns, not (G - b) / 1e-6 as with the scores' std (what the first GPU run hit)."""
    rows = [
        {"turns": [{"role": "assistant", "span": [0, 6], "reward": 0.2, "step_rewards": [0.1, 0.1, 0.0],
                    "code_calls": [{"span": [1, 2]}, {"span": [3, 4]}]}]},
        {"turns": [{"role": "assistant", "span": [0, 6], "reward": 0.2, "step_rewards": [0.1, 0.1],
                    "code_calls": [{"span": [1, 2]}]}]},
    ]  # fmt: skip
    scores = torch.zeros(2, 6)
    scores[:, 5] = 1.2
    adv, _ = turn_level_advantages(scores, torch.ones(2, 6), ["u", "u"], rows)
    assert adv[:, 0].tolist() == [0.0, 0.0]  # step 1: verl's GRPO, nothing to prefer
    assert adv.abs().max() < 3.0
