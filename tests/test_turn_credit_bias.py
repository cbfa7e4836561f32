"""turn_grpo is unbiased when the policy decides when to stop; the per-turn-index construction is not.

A two-decision agent, enumerated exactly: at turn 1 it calls a tool with probability p1 (logit θ1) or
answers; after a call, at turn 2 it calls again with probability p2 (logit θ2) or answers; after two
calls, turn 3 answers. Each call earns the process reward R on the turn that made it; the answer earns
an outcome that depends on the number of calls. For groups of N trajectories of one prompt, the
expected estimator  E[(1/N) sum_i sum_k A_ik * d log pi(a_ik) / d theta]  is computed over all 3^N
groups and compared with the true gradient of J = E[score] (verl RFC #7244: normalising each turn's
return among the rows that reached that turn makes the baseline depend on the row's own stopping
decisions).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from extensions import custom_advantages as ca

P1, P2, R, N = 0.6, 0.3, 0.2, 4
OUTCOME = {0: 0.3, 1: 1.0, 2: 0.5}  # by number of tool calls
PROB = {0: 1 - P1, 1: P1 * (1 - P2), 2: P1 * P2}


def score(calls: int) -> float:
    return R * calls + OUTCOME[calls]


def true_gradient() -> np.ndarray:
    """dJ/d(theta1, theta2) for J = sum_T P(T) score(T), with p = sigmoid(theta)."""
    after_call = (1 - P2) * score(1) + P2 * score(2)
    return np.array([P1 * (1 - P1) * (after_call - score(0)), P1 * P2 * (1 - P2) * (score(2) - score(1))])


def score_function(calls: int) -> np.ndarray:
    """(turn, theta) -> d log pi(a_turn) / d theta for a trajectory with ``calls`` tool calls (3 turns max)."""
    grads = np.zeros((3, 2))
    grads[0, 0] = (1 - P1) if calls >= 1 else -P1
    if calls >= 1:
        grads[1, 1] = (1 - P2) if calls == 2 else -P2
    return grads  # turn 3 (after two calls) decides nothing


def group_tensors(group: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, list[dict]]:
    rewards, mask, rows = torch.zeros(len(group), 3, dtype=torch.float64), torch.zeros(len(group), 3), []
    for i, calls in enumerate(group):
        mask[i, : calls + 1] = 1
        rewards[i, calls] = score(calls)
        rows.append(
            {
                "turns": [
                    {"role": "assistant", "span": [k, k + 1], "reward": R if k < calls else 0.0}
                    for k in range(calls + 1)
                ]
            }
        )
    return rewards, mask, rows


def expected_estimate(**kwargs: bool) -> np.ndarray:
    total = np.zeros(2)
    for group in itertools.product((0, 1, 2), repeat=N):
        rewards, mask, rows = group_tensors(group)
        adv, _ = ca.turn_level_advantages(rewards, mask, ["g"] * N, rows, gamma=1.0, **kwargs)
        estimate = sum(adv[i].numpy() @ score_function(calls) for i, calls in enumerate(group)) / N
        total += math.prod(PROB[c] for c in group) * estimate
    return total


def test_turn_grpo_is_the_true_gradient_scaled_by_grpos_own_share():
    truth = true_gradient()
    assert truth[0] > 0 and truth[1] < 0  # a first call pays, a second one does not
    np.testing.assert_allclose(expected_estimate(norm_by_std=False), (1 - 1 / N) * truth, rtol=1e-7)  # float32 masks


def test_per_index_normalisation_is_biased_under_policy_controlled_stopping():
    truth = true_gradient()
    biased = expected_estimate(norm_by_std=False, per_index=True)
    ratios = biased / truth
    # the two decisions are scaled differently: the expected update points elsewhere than the gradient
    assert ratios[0] == pytest.approx(1 - 1 / N, rel=1e-7)  # turn 1: every row, GRPO
    assert abs(ratios[1] - ratios[0]) > 0.05, ratios
    cosine = biased @ truth / np.linalg.norm(biased) / np.linalg.norm(truth)
    assert cosine < 1 - 1e-4


def test_with_std_normalisation_turn_grpo_keeps_one_scale_for_all_turns():
    """Dividing every turn by the same GRPO std leaves the direction close to the gradient's."""
    fixed, old = expected_estimate(norm_by_std=True), expected_estimate(norm_by_std=True, per_index=True)
    truth = true_gradient()

    def cosine(v: np.ndarray) -> float:
        return float(v @ truth / np.linalg.norm(v) / np.linalg.norm(truth))

    assert cosine(fixed) > cosine(old)
