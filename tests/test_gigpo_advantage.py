"""gigpo_turn (extensions/custom_advantages.py): the step term for rows sharing an anchor, exact tensors, on CPU and
through verl's compute_advantage. The shared fixtures and helpers are tests/test_custom_advantages.py's.

Run: ``PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_gigpo_advantage.py``
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl.trainer.config import AlgoConfig

from extensions import custom_advantages as ca
from extensions.errors import ConfigError
from extensions.verl_config import compose_verl_config
from tests.test_custom_advantages import (
    EPS,
    _registered,  # noqa: F401  (the autouse fixture: restores the rows provider)
    compute_advantage,
    other,
    proto,
    t,
    turn,
    z,
)


def gigpo_case() -> tuple[torch.Tensor, torch.Tensor, np.ndarray, list[dict | None]]:
    # Three rows of group "g", two turns each; S = 1, 0, 0.5; turn-1 rewards 0.25, 0.75, 0 -> G2 = 0.75, -0.75, 0.5.
    # Turn-2 anchors: rows 0 and 1 share "x"; row 2 has "y". Row 3 (group "h") also has "x" but another prompt.
    rewards = t([[0, 0, 0, 0, 0, 1.0], [0] * 6, [0, 0, 0, 0, 0, 0.5], [0, 0, 0, 0, 0, 1.0]])
    mask = t([[1, 1, 0, 1, 1, 1]] * 4)
    uids = np.array(["g", "g", "g", "h"], dtype=object)
    rows: list[dict | None] = [
        {"turns": [turn(0, 2, r), other("tool", 2, 3), turn(3, 6, 0.0, a)]}
        for r, a in ((0.25, "x"), (0.75, "x"), (0.0, "y"), (0.0, "x"))
    ]
    return rewards, mask, uids, rows


def test_gigpo_step_term_only_for_rows_sharing_an_anchor() -> None:
    rewards, mask, uids, rows = gigpo_case()
    adv, stats = ca.gigpo_advantages(rewards, mask, uids, rows, 1.0, False, step_weight=0.5)
    # A^E = 0.5, -0.5, 0 (group g: mean 0.5) and 1.0 (row 3, a group of one: mean 0);
    # A^S on turn 2 of rows 0 and 1 (anchor "x", mean 0): 0.75, -0.75, times omega = 0.5; "y" and h's "x" are alone
    expected = t(
        [
            [0.5, 0.5, 0, 0.875, 0.875, 0.875],
            [-0.5, -0.5, 0, -0.875, -0.875, -0.875],
            [0, 0, 0, 0, 0, 0],
            [1.0, 1.0, 0, 1.0, 1.0, 1.0],
        ]
    )
    assert torch.equal(adv, expected)
    assert (stats["step_groups"], stats["step_turns"], stats["step_weight"]) == (1, 2, 0.5)


def test_gigpo_with_std_and_a_shared_prompt_anchor() -> None:
    rewards, mask, uids, rows = gigpo_case()
    for row in rows:
        row["turns"][0]["anchor"] = "prompt"  # type: ignore[index]
    adv, stats = ca.gigpo_advantages(rewards, mask, uids, rows, 1.0, True, step_weight=1.0)
    e0, e1, e2 = z([1.0, 0.0, 0.5])
    s0, s1 = z([0.75, -0.75])
    e3 = (torch.tensor(1.0) / (torch.tensor(1.0) + EPS)).item()  # verl: a group of one has mean 0, std 1 (float32)
    episode = t([[e0, e0, 0, e0, e0, e0], [e1, e1, 0, e1, e1, e1], [e2, e2, 0, e2, e2, e2], [e3, e3, 0, e3, e3, e3]])
    # turn 1's step group (anchor "prompt" in group g) is the episode group: its step term equals A^E there
    step = t([[e0, e0, 0, s0, s0, s0], [e1, e1, 0, s1, s1, s1], [e2, e2, 0, 0, 0, 0], [0] * 6])
    assert torch.equal(adv, episode + step)
    assert stats["step_groups"] == 2


def test_gigpo_step_weight_from_the_command_line() -> None:
    cfg = compose_verl_config(["algorithm.adv_estimator=gigpo_turn", "+algorithm.gigpo_step_weight=0.5"])
    assert ca.step_weight_from(cfg.algorithm) == 0.5
    assert ca.step_weight_from(AlgoConfig()) == 1.0
    with pytest.raises(ConfigError, match=r"^algorithm.gigpo_step_weight must be a number, got 'lots'$"):
        ca.step_weight_from({"gigpo_step_weight": "lots"})
    rewards, mask, uids, rows = gigpo_case()
    ca.set_rows_provider(lambda: rows)
    data = proto(rewards, mask, uids)
    out = compute_advantage(data, adv_estimator="gigpo_turn", config=cfg.algorithm)
    expected, _ = ca.gigpo_advantages(rewards, mask, uids, rows, 1.0, True, step_weight=0.5)
    assert torch.equal(out.batch["advantages"], expected)
