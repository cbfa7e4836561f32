"""scripts/gpu/scale_hold.sh: its waves' runs, checked before anything starts (no GPU needed for these paths)."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import ROOT


def hold(waves: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"WAVES": waves}
    script = ROOT / "scripts/gpu/scale_hold.sh"
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)


def test_waves_that_reuse_a_run_name_are_refused() -> None:
    done = hold("A I", "status", "0")
    assert done.returncode == 2
    assert done.stderr == (
        'WAVES="A I" run colo_x1 sync_x1 twice (/tmp/runs/NAME): run those waves on separate machines\n'
    )


def test_an_unknown_wave_is_named() -> None:
    done = hold("K Z", "status", "0")
    assert done.returncode == 2 and "unknown wave Z (A to O)" in done.stderr


def test_wave_o_runs_n_and_m_side_by_side_and_refuses_them_again() -> None:
    done = hold("O N", "status", "0")
    assert done.returncode == 2
    assert done.stderr == (
        'WAVES="O N" run fold_pad128 fold_pad2 twice (/tmp/runs/NAME): run those waves on separate machines\n'
    )
