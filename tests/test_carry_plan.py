"""scripts/gpu/carry_plan.py: the last call can start a hold script instead of the install and carry a run's data
beside its parts, or in a call of its own when the parts leave no room."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script

START = 'WAVES="D G" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh'


def parts(tmp_path: Path, sizes: dict[str, int]) -> Path:
    folder = tmp_path / "parts"
    folder.mkdir()
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)
    return folder


@pytest.fixture
def plan(tmp_path: Path, monkeypatch):
    module = load_script("carry_plan", "scripts/gpu")
    monkeypatch.setattr(module, "REPO", tmp_path)  # --with paths are read relative to the repo
    (tmp_path / "outputs" / "data").mkdir(parents=True)
    (tmp_path / "outputs" / "data" / "train.parquet").write_bytes(b"d" * 300)
    return module


def test_the_last_call_starts_the_hold_and_carries_the_data(tmp_path: Path, plan) -> None:
    folder = parts(tmp_path, {"MANIFEST.sha256": 10, "wheels.tar.part-00": 600, "wheels.tar.part-01": 500})
    calls = plan.make_plan(folder, 1000, None, False, True, ("wheels",))
    calls = plan.last_step(calls, 1000, START, ["outputs/data"])
    assert [(c["carry"], c["also"], c["bytes"]) for c in calls] == [
        (".whl-gpu/carry/01", [], 610),
        (".whl-gpu/carry/02", ["outputs/data"], 800),  # 500 of parts + 300 of data
    ]
    assert calls[-1]["command"] == (
        'mkdir -p /tmp/longflow-parts && cp .whl-gpu/carry/02/* /tmp/longflow-parts/ && echo "call 2/2: '
        '$(ls /tmp/longflow-parts | wc -l) files in /tmp/longflow-parts, 3 expected" && ' + START
    )


def test_data_without_room_gets_a_call_of_its_own(tmp_path: Path, plan) -> None:
    folder = parts(tmp_path, {"wheels.tar.part-00": 900})
    calls = plan.last_step(plan.make_plan(folder, 1000, None, False, True, ("wheels",)), 1000, None, ["outputs/data"])
    assert [(c["carry"], c["also"], c["bytes"], c["install"]) for c in calls] == [
        (".whl-gpu/carry/01", [], 900, None),
        (None, ["outputs/data"], 300, plan.SETUP.format(steps="wheels,check")),  # the install moves with it
    ]
    assert calls[0]["command"].endswith('1 expected"')
    assert calls[1]["command"] == f'echo "call 2: outputs/data" && {plan.SETUP.format(steps="wheels,check")}'
    with pytest.raises(SystemExit) as error:
        plan.last_step(calls, 200, None, ["outputs/data"])
    assert str(error.value) == "--with outputs/data: 0.0 MiB, more than a call carries (0.0)"
