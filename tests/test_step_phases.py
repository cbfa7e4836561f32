"""benchmarks/step_phases.py: per-phase medians of a training run, start-up steps left out."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import step_phases as sp


def test_medians_skip_the_first_steps_and_cost_per_token(tmp_path: Path) -> None:
    lines = [{"step": 0, "data": {"val-core/x": 0.5}}]  # a validation line has no step timing
    for step, (total, update, tokens) in enumerate([(80, 40, 1000), (20, 5, 1000), (16, 4, 2000), (14, 3, 1000)], 1):
        lines.append({"step": step, "data": {"timing_s/step": total, "timing_s/update_actor": update}})
        lines.append({"step": step, "data": {"perf/total_num_tokens": tokens}})
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    table = sp.phase_table(path, skip=1)
    assert table["step_s"] == {"median": 16, "min": 14, "max": 20}
    assert table["update_actor_s"] == {"median": 4, "min": 3, "max": 5}
    assert table["update_actor_ms_per_1k_tokens"] == {"median": 3000, "min": 2000, "max": 5000}
    assert table["steps"]["median"] == 3 and "gen_s" not in table
