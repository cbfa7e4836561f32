"""The reward never makes trying a tool a loss, and no wrong answer with tools outscores a right one without."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from extensions.custom_rewards import compute_score
from extensions.errors import ConfigError

CONFIG = Path(__file__).resolve().parents[2] / "experiments" / "gsm8k_learn" / "config.yaml"
AB_KWARGS = yaml.safe_load(CONFIG.read_text())["reward"]["custom_reward_function"]["reward_kwargs"]


def score(*, right: bool, ok: int = 0, failed: int = 0, malformed: int = 0, **kwargs: float) -> float:
    extras = {
        "termination_reason": "final_answer",
        "num_tool_calls": ok + failed,
        "num_executed_calls": ok + failed,
        "num_successful_calls": ok,
        "num_malformed_tool_calls": malformed,
        "final_answer_text": "#### 72" if right else "#### 71",
    }
    return compute_score("longflow/gsm8k", "", "72", {"extras": extras}, **(kwargs or AB_KWARGS))["score"]


def test_the_ab_reward_walks_the_table():
    assert AB_KWARGS == {"mode": "flexible", "w_exec": 0.1, "exec_bonus_cap": 0.2, "exec_bonus_if_correct": True}
    table = {
        (right, ok, failed, malformed): score(right=right, ok=ok, failed=failed, malformed=malformed)
        for right, ok, failed, malformed in itertools.product((True, False), range(7), range(4), range(4))
    }
    worst_right = min(v for (right, *_), v in table.items() if right)
    best_wrong = max(v for (right, *_), v in table.items() if not right)
    assert worst_right == 1.0 and best_wrong == 0.0  # calls alone never earn
    for (right, ok, _failed, _malformed), value in table.items():
        plain = 1.0 if right else 0.0
        assert value == pytest.approx(plain + (min(0.1 * ok, 0.2) if right else 0.0))  # failed/malformed cost nothing
        assert value >= plain  # trying a tool is never a loss


def test_exact_scores_of_a_few_rows():
    assert score(right=True) == 1.0
    assert score(right=True, ok=1) == pytest.approx(1.1)
    assert score(right=True, ok=5, failed=3) == pytest.approx(1.2)
    assert score(right=False, ok=2, malformed=3) == 0.0
    assert score(right=False, failed=4) == 0.0


def test_without_exec_bonus_if_correct_the_bonus_is_paid_to_any_answer():
    """The reward of docs/results/gsm8k-tools-ab-h100: a wrong answer earned up to 0.2 for clean calls."""
    kwargs = {**AB_KWARGS, "exec_bonus_if_correct": False}
    assert score(right=True, ok=3, **kwargs) == pytest.approx(1.2)
    assert score(right=False, ok=3, **kwargs) == pytest.approx(0.2)
    assert score(right=False, ok=2, malformed=3, **kwargs) == pytest.approx(0.2)
    assert score(right=False, failed=4, **kwargs) == 0.0


@pytest.mark.parametrize("cap", [1.0, 1.5, 0.0])
def test_a_bonus_cap_that_could_let_tools_beat_the_outcome_is_rejected(cap):
    with pytest.raises(ConfigError) as error:
        score(right=True, w_exec=0.1, exec_bonus_cap=cap)
    assert str(error.value) == (
        f"reward_kwargs: key '(settings)': Value error, exec_bonus_cap={cap} must be in (0, w_outcome=1.0) when "
        f"w_exec > 0, so that a wrong answer with tools never outscores a right one without "
        f"(got {{'exec_bonus_cap': {cap}, 'w_exec': 0.1}})"
    )
