"""scripts/gpu/train_bg.sh --status: every run's files so far in one archive, whatever the number of runs (the GPU
machine hands back 8 files from $OUT at most; one archive a run lost the ninth). No GPU needed: the runs are
folders made here."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

RUNS = Path("/tmp/runs")


@pytest.fixture
def runs() -> Iterator[list[str]]:
    """Nine runs in /tmp/runs (where train_bg.sh keeps them): eight running, the last ended with a validation dump."""
    names = [f"status-{uuid.uuid4().hex[:8]}-{i}" for i in range(9)]
    for i, name in enumerate(names):
        d = RUNS / name
        (d / "src").mkdir(parents=True)  # the run's snapshot of the repo: never archived
        (d / "src" / "README.md").write_text("the repo as the run started\n")
        (d / "command.txt").write_text(f"python3 -m verl.trainer.main_ppo run {i}\n")
        (d / "metrics.jsonl").write_text('{"step": 1}\n')
        (d / "console.log").write_text(f"step:1 - timing_s/step:{10 + i}.5 - critic/score/mean:0.25\n")
    last = RUNS / names[-1]
    (last / "rc").write_text("0\n")
    (last / "val").mkdir()
    (last / "val" / "10.jsonl").write_text('{"acc": 1.0}\n')
    yield names
    for name in names:
        shutil.rmtree(RUNS / name, ignore_errors=True)


def status(out: Path, *names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts/gpu/train_bg.sh"), "--status", "0", *names],
        env=os.environ | {"OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_archives_every_run_in_one_file(runs: list[str], tmp_path: Path) -> None:
    not_started = f"status-{uuid.uuid4().hex[:8]}-none"  # named in the wave, no folder yet
    done = status(tmp_path, *runs, not_started)
    assert done.returncode == 0, done.stderr
    assert f"{runs[0]}: step:1 timing_s/step:10.5 critic/score/mean:0.25" in done.stdout
    assert f"{runs[-1]}: step:1 timing_s/step:18.5 critic/score/mean:0.25   tracebacks: 0 exit 0" in done.stdout
    assert f"\n{not_started}: " in done.stdout
    assert done.stdout.splitlines()[-1].startswith("runs.tgz: ") and done.stdout.rstrip().endswith(" KiB")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.tgz"]
    with tarfile.open(tmp_path / "runs.tgz") as tar:
        members = sorted(m.name for m in tar.getmembers() if m.isfile())
        console = tar.extractfile(f"{runs[3]}/console.log").read().decode()  # type: ignore[union-attr]
    expected = [f"{n}/{f}" for n in runs for f in ("command.txt", "console.log", "metrics.jsonl")]
    expected += [f"{runs[-1]}/rc", f"{runs[-1]}/val/10.jsonl"]
    assert members == sorted(expected)
    assert console == "step:1 - timing_s/step:13.5 - critic/score/mean:0.25\n"


def test_status_before_any_run_has_files_writes_no_archive(tmp_path: Path) -> None:
    done = status(tmp_path, f"status-{uuid.uuid4().hex[:8]}-none")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "runs.tgz: no run has files yet"
    assert list(tmp_path.iterdir()) == []
