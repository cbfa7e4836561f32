"""experiments/gsm8k_learn/pooled_scaling.py: weak scaling pooled over seeds, on the committed folding results."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location("pooled_scaling", ROOT / "experiments/gsm8k_learn/pooled_scaling.py")
pooled = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(pooled)
RESULTS = ROOT / "docs/results"
SEED1, SEED2 = RESULTS / "folding-whole-batch-h200x2", RESULTS / "folding-whole-batch-seed2-h200x2"


def test_two_seeds_pool_their_steps_before_the_ratio(capsys) -> None:
    argv = ["--base", str(SEED1 / "fold_sync_x1_wb"), str(SEED2 / "fold_sync_x1_wb_s2")]
    argv += ["--scaled", str(SEED1 / "fold_sync_x2_wb"), str(SEED2 / "fold_sync_x2_wb_s2")]
    assert pooled.main(argv) == 0
    out = capsys.readouterr().out
    assert "| base, pooled | 1 | 10 | 6.88 | 10,177 | 1,478 |" in out
    assert "| scaled, pooled | 2 | 10 | 12.01 | 17,221 | 1,433 |" in out
    assert "| fold_sync_x2_wb / fold_sync_x1_wb | 2.206 | 1.720 |" in out
    assert "| fold_sync_x2_wb_s2 / fold_sync_x1_wb_s2 | 1.393 | 1.696 |" in out
    assert out.endswith("| pooled | **1.745** | **1.692** |\n")
    assert out == (SEED2 / "pooled.md").read_text().split("```\n\n", 1)[1]  # the committed table is this command's


def test_pooling_sums_before_dividing() -> None:
    one = pooled.totals(SEED1 / "fold_sync_x1_wb", 2)
    two = pooled.totals(SEED2 / "fold_sync_x1_wb_s2", 2)
    both = pooled.pooled([one, two])
    assert both["trajectories"] == 1280 and both["steps"] == 10
    assert pooled.rates(both)[0] == pytest.approx(1280 / (one["seconds"] + two["seconds"]))
    assert pooled.rates(both)[0] != pytest.approx((pooled.rates(one)[0] + pooled.rates(two)[0]) / 2, rel=1e-3)


def test_bad_groups_are_named(tmp_path: Path) -> None:
    one, two = SEED1 / "fold_sync_x1_wb", SEED1 / "fold_sync_x2_wb"
    with pytest.raises(SystemExit, match=r"runs pooled together must have one GPU count, not \[1.0, 2.0\]"):
        pooled.main(["--base", str(one), str(two), "--scaled", str(SEED2 / "fold_sync_x2_wb_s2")])
    with pytest.raises(SystemExit, match=r"fold_sync_x1_wb: no step from step 7 on"):
        pooled.main(["--base", str(one), "--scaled", str(two), "--from", "7"])
    bare = tmp_path / "bare"
    shutil.copytree(one, bare)
    lines = (bare / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    del record["data"]["perf/total_num_tokens"]
    (bare / "metrics.jsonl").write_text("\n".join([*lines[:-1], json.dumps(record)]) + "\n")
    with pytest.raises(SystemExit, match=r"bare/metrics.jsonl: a step from step 2 on has no perf/total_num_tokens"):
        pooled.totals(bare, 2)
