"""A training signal that fails loudly (extensions/training_signal.py, segment_weights.py): the error-rate
threshold, non-finite scores, segment counts read one way, and no silent skip when the rows are missing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from extensions.errors import ConfigError, SampleError
from extensions.metrics import longflow_metrics
from extensions.segment_weights import is_last_segment, segment_count, segment_weights, weigh_advantages
from extensions.training_signal import (
    DEFAULT_MAX_ERROR_RATE,
    TrainingSignalError,
    after_advantages,
    check_error_rate,
    max_error_rate,
)


def data(rows: int, **batch: torch.Tensor) -> SimpleNamespace:
    tensors = {"advantages": torch.ones(rows, 2), "token_level_rewards": torch.zeros(rows, 2), **batch}
    return SimpleNamespace(batch=tensors, non_tensor_batch={"uid": np.array([f"u{i}" for i in range(rows)])})


@pytest.mark.parametrize("three", [3, np.int64(3), np.int32(3), 3.0, np.float64(3.0)])
def test_a_segment_count_reads_the_same_whatever_its_number_type(three) -> None:
    rows = [{"segment": i, "num_segments": three} for i in range(3)] + [None]
    assert [segment_count(row) for row in rows] == [3, 3, 3, 1]
    assert [is_last_segment(row) for row in rows[:3]] == [False, False, True]
    third = torch.tensor(1 / 3).item()  # float32, as the weights
    assert segment_weights(rows, "inverse_count").tolist() == [third, third, third, 1.0]
    batch = data(4)
    weigh_advantages(batch, rows, {"adv_estimator": "grpo"})
    assert batch.batch["advantages"][:, 0].tolist() == [third, third, third, 1.0]
    with pytest.raises(ConfigError, match=r"^algorithm.adv_estimator='turn_grpo' cannot train folded"):
        weigh_advantages(data(4), rows, {"adv_estimator": "turn_grpo"})  # the GRPO-only check reads the same count
    m = longflow_metrics([{**row, "termination_reason": "final_answer"} for row in rows[:3]])
    assert (m["longflow/segments/mean"], m["longflow/termination/final_answer"]) == (3.0, 1.0)


@pytest.mark.parametrize(
    ("value", "shown"), [(2.5, "2.5"), (0, "0"), (True, "True"), ("3", "'3'"), (np.float64(1.5), "np.float64(1.5)")]
)
def test_a_non_integral_segment_count_is_an_error_naming_the_row(value, shown) -> None:
    with pytest.raises(SampleError) as err:
        segment_weights([None, {"num_segments": value}], "inverse_count")
    assert str(err.value) == (
        f"row 1: extras.num_segments must be a whole number >= 1 (the folding loop writes it), got {shown}"
    )
    with pytest.raises(SampleError, match=r"^row 0: extras.segment must be a whole number in \[0, 2\), got 2$"):
        is_last_segment({"segment": 2, "num_segments": 2}, row_index=0)


def test_without_rows_the_segment_weights_stop_the_step() -> None:
    with pytest.raises(RuntimeError) as err:
        weigh_advantages(data(2), None, {"adv_estimator": "grpo"})
    assert str(err.value) == (
        "segment weights: no per-row records for this batch, so folded trajectories cannot be weighed; the step "
        "stops rather than weigh an N-segment trajectory N times. The verl seam reads them "
        "(extensions/verl_compat/trainer_hooks.py); run `pytest tests/test_verl_compat.py tests/test_folding_v1.py`"
    )


def row(reason: str, error: str | None = None, **more) -> dict:
    return {"turns": [], "termination_reason": reason, "error": error, **more}


def test_an_error_rate_above_the_threshold_stops_training() -> None:
    rows = [row("final_answer")] * 17 + [row("error", "ValueError: bad tool config"), row("error", "KeyError: 'x'")]
    rows += [None]  # a row without records is no trajectory of the pack's
    check_error_rate(rows, 0.15)  # 2 of 19 = 10.5 %: within
    with pytest.raises(TrainingSignalError) as err:
        check_error_rate(rows, 0.1)
    assert str(err.value) == (
        "2 of 19 trajectories (10.5%) ended in `error` this step, more than algorithm.max_error_rate=0.1; training "
        "stops rather than learn from masked rows. First errors: KeyError: 'x'; ValueError: bad tool config. Fix the "
        "cause (run the rollout CLI on a few samples: `python -m extensions.rollout ... --max-error-rate 0`), or "
        "raise the limit with +algorithm.max_error_rate=<fraction>"
    )


def test_a_folded_trajectory_counts_once_in_the_error_rate() -> None:
    folded = [row("folded", segment=0, num_segments=3), row("folded", segment=1, num_segments=3.0)]
    rows = [*folded, row("error", "boom", segment=np.int64(2), num_segments=np.int64(3)), row("final_answer")]
    check_error_rate(rows, 0.5)  # 1 of 2 trajectories
    with pytest.raises(TrainingSignalError, match=r"^1 of 2 trajectories \(50.0%\) ended in `error` this step"):
        check_error_rate(rows, 0.49)


def test_the_threshold_setting() -> None:
    assert max_error_rate(None) == max_error_rate({}) == DEFAULT_MAX_ERROR_RATE == 0.05
    assert max_error_rate({"max_error_rate": 1}) == 1.0
    for bad in (1.5, -0.1, "0.1", True):
        with pytest.raises(ConfigError) as err:
            max_error_rate({"max_error_rate": bad})
        assert str(err.value) == f"algorithm.max_error_rate must be a number between 0 and 1, got {bad!r}"


def test_the_config_check_reports_a_bad_threshold(tmp_path) -> None:
    from extensions.config_check import check_file

    exp = tmp_path / "experiments" / "bad"
    exp.mkdir(parents=True)
    (exp / "config.yaml").write_text(
        "hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults: [ppo_trainer, _self_]\n"
        "algorithm: {adv_estimator: grpo, max_error_rate: 2}\n"
        "actor_rollout_ref: {model: {override_config: {attn_implementation: sdpa}}}\n"
    )
    problems = check_file(exp / "config.yaml")
    assert problems == [f"{exp / 'config.yaml'}: algorithm.max_error_rate must be a number between 0 and 1, got 2"], (
        problems
    )


def test_the_post_advantage_hook_checks_then_weighs() -> None:
    rows = [row("final_answer", segment=0, num_segments=2), row("final_answer", segment=1, num_segments=2)]
    batch = data(2)
    after_advantages(batch, rows, {"adv_estimator": "grpo"})
    assert batch.batch["advantages"].tolist() == [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(TrainingSignalError, match=r"^1 of 1 trajectories \(100.0%\) ended in `error`"):
        after_advantages(data(1), [row("error")], {"adv_estimator": "grpo", "max_error_rate": 0.5})
    bad = data(3, token_level_rewards=torch.tensor([[0.0, 1.0], [0.0, float("nan")], [float("inf"), 0.0]]))
    with pytest.raises(TrainingSignalError) as err:
        after_advantages(bad, [None, None, None], {"adv_estimator": "grpo"})
    assert str(err.value) == (
        "token_level_rewards is not finite in 2 of 3 rows: row 1 (uid u1), row 2 (uid u2). A NaN or inf score "
        "poisons its whole GRPO group; find the reward or score that produced it (extensions/rewards/trajectory.py "
        "names non-finite turn scores and tool rewards)"
    )
    nan_advantages = data(2, advantages=torch.tensor([[0.0, 0.0], [float("nan"), 0.0]]))
    with pytest.raises(TrainingSignalError, match=r"^advantages is not finite in 1 of 2 rows: row 1 \(uid u1\)\."):
        after_advantages(nan_advantages, [None, None], {"adv_estimator": "grpo"})
