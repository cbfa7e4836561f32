"""scripts/gpu/engines_table.py: the side-by-side table of two engines' driver outputs, with greedy agreement."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_script


def write_engine(res: Path, engine: str, responses: dict[int, list[int]], *, segments: dict[int, list[int]]) -> None:
    d = res / engine
    d.mkdir(parents=True)
    lines = []
    for index, ids in responses.items():
        segs = [{"response_ids": segments[index]}] if index in segments else []
        reason = "error" if not ids else "final_answer"
        lines.append(json.dumps({"index": index, "response_ids": ids, "segments": segs, "termination_reason": reason}))
    (d / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    summary = {"trajectories": len(responses), "errors": 0, "backend_start_s": 41.5, "accuracy": 0.5}
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "rc").write_text("0\n")


def test_agreement_counts_identical_trajectories_and_the_first_difference(tmp_path: Path) -> None:
    table = load_script("gpu/engines_table")
    write_engine(tmp_path, "sglang", {0: [1, 2, 3], 1: [5, 6, 7, 8], 2: [9], 3: [4, 4], 5: []}, segments={2: [7, 7]})
    # 0 identical; 1 parts at token 2; 2 parts inside its earlier segment (token 1); 3 is a prefix (parts at 2);
    # 4 exists in one engine only and 5 failed (error, no tokens) in both: neither is compared
    vllm = {0: [1, 2, 3], 1: [5, 6, 0, 8], 2: [9], 3: [4, 4, 4], 4: [1], 5: []}
    write_engine(tmp_path, "vllm", vllm, segments={2: [7, 8]})
    rows, md = table.table(tmp_path, ["sglang", "vllm"])
    assert rows["agreement"] == {
        "engines": ["sglang", "vllm"],
        "compared": 4,
        "identical": 1,
        "median_first_difference": 2,
    }
    assert "| backend_start_s | 41.5 | 41.5 |" in md
    assert "Greedy agreement (sglang vs vllm, trajectories that ended in error left out): 1 of 4 token-identical" in md


def test_agreement_with_every_trajectory_identical_names_no_difference(tmp_path: Path) -> None:
    table = load_script("gpu/engines_table")
    write_engine(tmp_path, "sglang", {0: [1, 2]}, segments={})
    write_engine(tmp_path, "vllm", {0: [1, 2]}, segments={})
    rows, md = table.table(tmp_path, ["sglang", "vllm"])
    assert rows["agreement"]["identical"] == 1 and "median first differing response token -." in md


def test_a_failed_engine_shows_its_error_and_no_agreement(tmp_path: Path) -> None:
    table = load_script("gpu/engines_table")
    write_engine(tmp_path, "vllm", {0: [1]}, segments={})
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "rc").write_text("1\n")
    (tmp_path / "sglang" / "driver.log").write_text("Traceback\nImportError: sgl_kernel\n")
    rows, md = table.table(tmp_path, ["sglang", "vllm"])
    assert "agreement" not in rows and rows["sglang"]["exit"] == 1
    assert "**sglang failed** (last lines of driver.log):\n```\nTraceback\nImportError: sgl_kernel\n```" in md
