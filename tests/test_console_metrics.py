"""scripts/console_metrics.py: verl's console step lines back into its file logger's metrics.jsonl."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "console_metrics.py"
RUN = ROOT / "docs" / "results" / "long-tail-scaling-h200x2" / "colo_x2"  # a GPU run that logged both


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_a_real_runs_console_gives_exactly_its_metrics_jsonl() -> None:
    done = run(str(RUN / "console.log.gz"))
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    want = [json.loads(line) for line in (RUN / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in got] == list(range(1, 11))
    assert got == want


def test_ray_prefixes_numpy_reprs_and_nan(tmp_path: Path) -> None:
    log = tmp_path / "console.log.gz"
    with gzip.open(log, "wt") as out:
        out.write("\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m Training Progress: 1/8\n")
        out.write(
            "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m step:3 - a/b:np.float64(0.25) - n:np.int64(16) - loss:-1.5e-05"
            " - bad:nan - ok:True - big:7 - val-core/a:b/acc:0.5\n"
        )
    done = run(str(log))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "step": 3,
        "data": {"a/b": 0.25, "n": 16, "loss": -1.5e-05, "bad": None, "ok": True, "big": 7, "val-core/a:b/acc": 0.5},
    }


def test_a_part_that_does_not_parse_names_the_line(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("start\nstep:1 - a:0.5 - b:fast\n")
    done = run(str(log))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"{log}:2: a step line that does not parse: could not convert string to float: 'fast'"
    )


@pytest.mark.parametrize("text", ["", "no steps here\n"])
def test_a_log_without_step_lines_is_an_error(tmp_path: Path, text: str) -> None:
    log = tmp_path / "console.log"
    log.write_text(text)
    done = run(str(log))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == f"{log}: no verl step lines (step:N - key:value ...)"


def test_a_part_without_a_colon_names_the_line(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("step:1 - a - b:0.5\n")  # a key with " - " in it splits into parts verl did not print
    done = run(str(log))
    assert (done.returncode, done.stderr.strip()) == (
        1,
        f"{log}:1: a step line that does not parse: 'a' is not key:value",
    )
