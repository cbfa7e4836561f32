"""experiments/gsm8k_learn/scaling_report.py: per-step rows, medians and speed-ups from verl's metrics files."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location("scaling_report", ROOT / "experiments/gsm8k_learn/scaling_report.py")
report = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(report)


def write_run(root: Path, name: str, command: str, steps: list[dict[str, float]]) -> None:
    run = root / name
    run.mkdir()
    (run / "command.txt").write_text(f"# env: X=1\npython3 -m verl.trainer.main_ppo {command}\n")
    lines = [json.dumps({"step": i, "data": data}) for i, data in enumerate(steps, start=1)]
    lines.insert(1, json.dumps({"step": 1, "data": {"val-core/x": 0.5}}))  # a record without timing is skipped
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def step(step_s: float, gen_s: float, span_s: float, lag: float, per_gpu: float) -> dict[str, float]:
    return {
        "timing_s/step": step_s,
        "timing_s/gen": gen_s,
        "timing_s/update_actor": 1.0,
        "longflow/rollout/span_s": span_s,
        "longflow/rollout/take_lag_s": lag,
        "perf/throughput": per_gpu,
        "actor/perf/max_memory_allocated_gb": 20.0,
    }


def test_setup_is_read_from_presets_and_overrides() -> None:
    assert report.run_setup("a +gpus=x4 +mode=sync trainer.test_freq=-1 trainer.total_training_steps=10") == {
        "gpus": 4,
        "prompts": 64,
        "n": 8,
        "mode": "sync",
        "test_freq": -1,
        "steps": 10,
    }
    separate = report.run_setup("+gpus=x2 +mode=separate_async trainer.nnodes=2")
    assert (separate["gpus"], separate["prompts"]) == (5, 32)  # 2 nodes x 2 trainer GPUs + 1 rollout GPU
    assert (
        report.run_setup("+gpus=x4 data.train_batch_size=16 +mode=colocate_async trainer.test_freq=3")["prompts"] == 16
    )


def test_a_whole_batch_run_is_a_mode_of_its_own() -> None:
    whole = "+gpus=x2 +mode=sync +trainer.v1.whole_batch_update=true"
    assert report.run_setup(whole)["mode"] == "sync whole-batch"
    assert report.run_setup("+gpus=x1 +mode=colocate_async +trainer.v1.whole_batch_update=True")["mode"] == (
        "colocate_async whole-batch"
    )
    assert report.run_setup("+gpus=x1 +mode=sync +trainer.v1.whole_batch_update=false")["mode"] == "sync"


def test_medians_speedups_and_the_validated_steps_lag(tmp_path: Path) -> None:
    write_run(
        tmp_path,
        "one",
        "+gpus=x1 +mode=sync trainer.test_freq=3",
        [step(60, 10, 9.9, 0.05, 100), step(16, 12, 11.9, 0.06, 1000), step(20, 16, 15.8, 70.0, 900)],
    )
    write_run(
        tmp_path,
        "two",
        "+gpus=x2 +mode=sync trainer.test_freq=-1",
        [step(70, 10, 9.9, 0.05, 100), step(20, 15, 14.9, 0.07, 800), step(24, 19, 18.9, 0.09, 700)],
    )
    assert report.main([str(tmp_path), "one", "two", "--no-plots", "--drop-validated-lag", "one"]) == 0
    rows = list(csv.DictReader((tmp_path / "steps.csv").read_text().splitlines()))
    assert [(r["run"], r["step"], r["take_lag_s"]) for r in rows] == [
        ("one", "1", "0.05"),
        ("one", "2", "0.06"),
        ("one", "3", ""),  # step 3 validated: no lag
        ("two", "1", "0.05"),
        ("two", "2", "0.07"),
        ("two", "3", "0.09"),
    ]
    summary = {r["run"]: r for r in csv.DictReader((tmp_path / "summary.csv").read_text().splitlines())}
    assert float(summary["one"]["step_s"]) == 18.0 and float(summary["one"]["take_lag_s"]) == 0.06
    assert float(summary["one"]["trajectories_per_s"]) == pytest.approx(256 / 36)
    assert float(summary["two"]["trajectories_per_s"]) == pytest.approx(512 / 44)
    assert float(summary["two"]["speedup_vs_sync_1gpu"]) == pytest.approx((512 / 44) / (256 / 36))
    assert float(summary["two"]["tokens_per_s"]) == pytest.approx((1600 * 20 + 1400 * 24) / 44)
    assert float(summary["one"]["gen_minus_span_max_s"]) == pytest.approx(0.2)
    assert (tmp_path / "summary.md").read_text().startswith("| run | GPUs | mode |")
    assert report.main([str(tmp_path), "one", "--no-plots"]) == 0  # a run after the fix keeps every step's lag
    assert [r["take_lag_s"] for r in csv.DictReader((tmp_path / "steps.csv").read_text().splitlines())][-1] == "70.0"


def test_weak_scaling_within_a_mode_and_the_plots(tmp_path: Path) -> None:
    write_run(tmp_path, "sync1", "+gpus=x1 +mode=sync", [step(60, 10, 9.9, 0.05, 100), step(16, 12, 11.9, 0.06, 1000)])
    write_run(tmp_path, "colo1", "+gpus=x1 +mode=colocate_async", [step(30, 5, 9, 0.05, 100), step(8, 4, 9, 0.1, 2000)])
    write_run(
        tmp_path, "colo1b", "+gpus=x1 +mode=colocate_async", [step(30, 5, 9, 0.05, 99), step(10, 4, 9, 0.1, 1600)]
    )
    write_run(tmp_path, "colo4", "+gpus=x4 +mode=colocate_async", [step(40, 5, 9, 0.05, 99), step(9, 5, 9, 0.1, 1800)])
    write_run(tmp_path, "sep", "+gpus=x1 +mode=separate_async", [step(20, 3, 9, 0.05, 99), step(6, 3, 8, 0.1, 1500)])
    assert report.main([str(tmp_path), "sync1", "colo1", "colo1b", "colo4", "sep"]) == 0
    summary = {r["run"]: r for r in csv.DictReader((tmp_path / "summary.csv").read_text().splitlines())}
    colo_one = (128 / 8 + 128 / 10) / 2  # the mean of the mode's two 1-GPU runs
    assert float(summary["colo4"]["speedup_vs_mode_1gpu"]) == pytest.approx((512 / 9) / colo_one)
    assert float(summary["colo1"]["speedup_vs_sync_1gpu"]) == pytest.approx((128 / 8) / (128 / 16))
    assert summary["sep"]["gpus"] == "2" and summary["sep"]["speedup_vs_mode_1gpu"] == ""  # no 1-GPU separate run
    table = (tmp_path / "summary.md").read_text().splitlines()
    assert table[-1].split(" | ")[11:13] == ["2.67", "-"]  # sep: x sync 1 GPU, x mode 1 GPU
    for png in ("phases.png", "throughput.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_figures_read_as_dashes_and_bad_input_is_named(tmp_path: Path, capsys) -> None:
    """No sync 1-GPU run, a run without the span metric, a run whose every lag was dropped: '-' cells, no crash."""
    no_span = {k: v for k, v in step(9, 4, 0, 0.1, 2000).items() if k != "longflow/rollout/span_s"}
    write_run(tmp_path, "colo", "+gpus=x1 +mode=colocate_async trainer.test_freq=1", [step(30, 5, 9, 0.1, 99), no_span])
    assert report.main([str(tmp_path), "colo", "--no-plots", "--drop-validated-lag", "colo"]) == 0
    (row,) = (tmp_path / "summary.md").read_text().splitlines()[2:]
    assert row.split(" | ")[6:13] == [
        "4.0",
        "-",
        "-",
        "1.0",
        "14.22",
        "-",
        "1.00",
    ]  # gen, span, lag, ..., x sync, x mode
    with pytest.raises(SystemExit) as error:
        report.main([str(tmp_path), "colo", "--no-plots", "--from", "3"])
    assert str(error.value) == "colo: no step from step 3 on (its last: 2)"
    with pytest.raises(SystemExit):
        report.main([str(tmp_path), "colo", "--no-plots", "--drop-validated-lag", "colo_x1"])
    assert "--drop-validated-lag names ['colo_x1'], not among the runs ['colo']" in capsys.readouterr().err


def test_a_run_of_another_result_is_named_by_its_folder(tmp_path: Path, capsys) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    write_run(
        there,
        "colo1",
        "+gpus=x1 +mode=colocate_async trainer.test_freq=2",
        [step(30, 5, 9, 0.1, 99), step(8, 4, 9, 0.2, 2000)],
    )
    write_run(here, "colo2", "+gpus=x2 +mode=colocate_async", [step(30, 5, 9, 0.1, 99), step(8, 4, 9, 0.1, 2000)])
    assert report.main([str(here), "../there/colo1", "colo2", "--no-plots", "--drop-validated-lag", "colo1"]) == 0
    summary = {r["run"]: r for r in csv.DictReader((here / "summary.csv").read_text().splitlines())}
    assert list(summary) == ["colo1", "colo2"] and summary["colo1"]["take_lag_s"] == ""  # its validated step dropped
    assert float(summary["colo2"]["speedup_vs_mode_1gpu"]) == pytest.approx((256 / 8) / (128 / 8))
    assert not (there / "summary.csv").exists()  # everything is written to RESULTS
    with pytest.raises(SystemExit):
        report.main([str(here), "../there/colo1", "colo1", "--no-plots"])
    assert "two runs share a folder name: ['../there/colo1', 'colo1']" in capsys.readouterr().err


def test_the_tail_table_says_what_the_slowest_trajectory_spent_its_time_on(tmp_path: Path) -> None:
    def timed(wall_max: float, tool_s: float, generate_s: float | None) -> dict[str, float]:
        split = {"tool_s": tool_s, "user_s": 0.0, "generated_tokens": 300.0, "assistant_turns": 1.0}
        if generate_s is not None:
            split["generate_s"] = generate_s
        return step(20, 15, 14.9, 0.05, 900) | {
            "longflow/rollout/wall_s/max": wall_max,
            "longflow/rollout/wall_s/mean": 2.0,
            **{f"longflow/rollout/slowest/{key}": value for key, value in split.items()},
        }

    steps = [timed(30.0, 0.0, 1.0), timed(12.0, 10.0, 1.5), timed(14.0, 0.0, 13.5), timed(11.0, 9.0, 1.75)]
    write_run(tmp_path, "now", "+gpus=x2 +mode=sync", steps)
    write_run(tmp_path, "before", "+gpus=x1 +mode=sync", [timed(16.0, 0.0, None), timed(15.0, 0.0, None)])
    write_run(tmp_path, "untimed", "+gpus=x1 +mode=colocate_async", [step(9, 4, 8, 0.05, 1000)] * 2)
    assert report.main([str(tmp_path), "now", "before", "untimed", "--no-plots"]) == 0
    lines = (tmp_path / "tail.md").read_text().splitlines()
    assert lines[2:4] == [  # steps 2-4: medians; step 1 (start-up) left out; "untimed" logged no rollout timing
        "| now | 2 | sync | 12.0 | 2.0 | 2 of 3 steps | 9.0 | 1.8 | 0.0 | 300 | 1 |",
        "| before | 1 | sync | 15.0 | 2.0 | 0 of 1 steps | 0.0 | - | 0.0 | 300 | 1 |",
    ]
    assert lines[4:] == ["", report.TAIL_NOTE.strip()]


def test_the_tail_table_adds_quantiles_the_time_bound_and_the_score_where_a_run_logged_them(tmp_path: Path) -> None:
    def timed(wall: tuple[float, float, float], bounded: float | None, score: float) -> dict[str, float]:
        figures = step(20, 10, 9.9, 0.05, 900) | {
            "longflow/rollout/wall_s/max": wall[2],
            "longflow/rollout/wall_s/mean": 3.0,
            "longflow/rollout/wall_s/p50": wall[0],
            "longflow/rollout/wall_s/p90": wall[1],
            "critic/score/mean": score,
            **{f"longflow/rollout/slowest/{key}": 1.0 for key in ("tool_s", "generate_s", "user_s")},
            "longflow/rollout/slowest/generated_tokens": 200.0,
            "longflow/rollout/slowest/assistant_turns": 2.0,
        }
        return figures | ({} if bounded is None else {"longflow/termination/time_budget": bounded})

    free = [timed((9, 9, 9), 0.0, 0.0), timed((2.0, 6.0, 15.0), 0.0, 0.5), timed((2.5, 7.0, 19.0), 0.0, 0.25)]
    bound = [timed((9, 9, 9), 0.5, 0.0), timed((2.0, 5.0, 8.5), 0.0625, 0.25), timed((2.5, 6.0, 9.5), 0.125, 0.5)]
    write_run(tmp_path, "free", "+gpus=x1 +mode=sync", free)
    write_run(tmp_path, "bound", "+gpus=x1 +mode=sync", bound)
    write_run(tmp_path, "older", "+gpus=x1 +mode=sync", [timed((9, 9, 9), None, 0.0)] * 2)
    assert report.main([str(tmp_path), "free", "bound", "older", "--no-plots"]) == 0
    lines = (tmp_path / "tail.md").read_text().splitlines()
    assert lines[0] == (
        "| run | GPUs | mode | slowest s | mean s | p50 s | p90 s | tool time in | tool s | generate s | user s | tokens "
        "| turns | ended by time bound | score |"
    )
    assert lines[1] == "|---" * 15 + "|"
    assert lines[2:5] == [  # steps 2-3: medians of the seconds, means of the share and the score
        "| free | 1 | sync | 17.0 | 3.0 | 2.2 | 6.5 | 2 of 2 steps | 1.0 | 1.0 | 1.0 | 200 | 2 | 0.0 % | 0.375 |",
        "| bound | 1 | sync | 9.0 | 3.0 | 2.2 | 5.5 | 2 of 2 steps | 1.0 | 1.0 | 1.0 | 200 | 2 | 9.4 % | 0.375 |",
        "| older | 1 | sync | 9.0 | 3.0 | 9.0 | 9.0 | 1 of 1 steps | 1.0 | 1.0 | 1.0 | 200 | 2 | - | 0.000 |",
    ]


def test_the_balance_batch_seconds_are_a_column_only_where_a_run_logged_them(tmp_path: Path) -> None:
    timed = [step(60, 10, 9.9, 0.05, 100) | {"timing_s/balance_batch": 0.5}, step(16, 12, 11.9, 0.06, 1000)]
    timed[1]["timing_s/balance_batch"] = 0.25
    write_run(tmp_path, "new", "+gpus=x1 +mode=sync", timed)
    write_run(tmp_path, "old", "+gpus=x2 +mode=sync", [step(60, 10, 9.9, 0.05, 100), step(16, 12, 11.9, 0.06, 1000)])
    assert report.main([str(tmp_path), "new", "old", "--no-plots"]) == 0
    steps = list(csv.DictReader((tmp_path / "steps.csv").read_text().splitlines()))
    assert [(r["run"], r["step"], r["balance_batch_s"]) for r in steps] == [
        ("new", "1", "0.5"),
        ("new", "2", "0.25"),
        ("old", "1", ""),
        ("old", "2", ""),
    ]
    summary = {r["run"]: r for r in csv.DictReader((tmp_path / "summary.csv").read_text().splitlines())}
    assert (summary["new"]["balance_batch_s"], summary["old"]["balance_batch_s"]) == ("0.25", "")  # step 2 on
    write_run(tmp_path, "older", "+gpus=x1 +mode=sync", [step(60, 10, 9.9, 0.05, 100), step(16, 12, 11.9, 0.06, 1000)])
    assert report.main([str(tmp_path), "old", "older", "--no-plots"]) == 0
    assert "balance_batch_s" not in (tmp_path / "steps.csv").read_text()  # results made before it: unchanged
    assert "balance_batch_s" not in (tmp_path / "summary.csv").read_text()
