"""scripts/val_compare.py pairs validation rows by prompt: a dump holding a prompt twice (VAL_ALSO runs the same
held-out prompts through a second loop) cannot be paired, and it says so instead of mixing the loops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import load_script


def test_repeated_prompts_are_refused(tmp_path: Path) -> None:
    vc = load_script("val_compare")
    (tmp_path / "run" / "val").mkdir(parents=True)
    rows = [{"input": "q1", "gts": "4", "score": 1.0}, {"input": "q2", "gts": "5", "score": 0.0}]
    (tmp_path / "run" / "val" / "0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert {k: v["score"] for k, v in vc.load(tmp_path / "run")[0].items()} == {"q1\x004": 1.0, "q2\x005": 0.0}
    (tmp_path / "run" / "val" / "3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, rows[0]]))
    with pytest.raises(SystemExit) as error:
        vc.load(tmp_path / "run")
    assert str(error.value) == (
        f"{tmp_path / 'run'}: step 3's validation dump has 1 repeated prompt(s); rows cannot be paired "
        "(a validation set with the same prompts twice, such as VAL_ALSO's?)"
    )
