"""scripts/gpu/park_results.sh: the committed results leave the working tree for a hold (every device call carries
the tree) and come back; it refuses to park uncommitted results or to restore over a new docs/results."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def sh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)


def test_park_and_restore(tmp_path: Path) -> None:
    repo, park = tmp_path / "repo", tmp_path / "parked"
    (repo / "scripts" / "gpu").mkdir(parents=True)
    (repo / "docs" / "results" / "run").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu" / "park_results.sh", repo / "scripts" / "gpu")
    (repo / "docs" / "results" / "run" / "log.txt").write_text("x" * 5000)
    (repo / "README.md").write_text("hi\n")
    for args in (("init", "-q"), ("add", "."), ("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x")):
        assert sh("git", *args, cwd=repo).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "LONGFLOW_PARK_DIR": str(park)}
    script = "scripts/gpu/park_results.sh"

    (repo / "docs" / "results" / "run" / "log.txt").write_text("changed")
    refused = sh("bash", script, "park", cwd=repo, env=env)
    assert (refused.returncode, refused.stderr) == (
        1,
        "error: docs/results has uncommitted changes: commit them first\n",
    )
    assert sh("git", "checkout", "-q", "--", "docs", cwd=repo).returncode == 0

    parked = sh("bash", script, "park", cwd=repo, env=env)
    assert parked.returncode == 0, parked.stderr
    assert parked.stdout.startswith(f"parked docs/results in {park}; working tree now ")
    assert not (repo / "docs" / "results").exists() and (park / "run" / "log.txt").read_text() == "x" * 5000
    again = sh("bash", script, "park", cwd=repo, env=env)
    assert (again.returncode, again.stderr) == (1, f"error: {park} exists: restore (or move) it first\n")

    (repo / "docs" / "results").mkdir()
    blocked = sh("bash", script, "restore", cwd=repo, env=env)
    assert blocked.returncode == 1 and "docs/results exists again" in blocked.stderr
    (repo / "docs" / "results").rmdir()
    restored = sh("bash", script, "restore", cwd=repo, env=env)
    assert (restored.returncode, restored.stdout) == (0, "restored docs/results\n")
    assert sh("git", "status", "--porcelain", cwd=repo).stdout == ""
