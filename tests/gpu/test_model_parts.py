"""scripts/gpu/model_parts.py: a model folder goes out as checked pieces a few per call, comes back whole, re-splits
into carry parts, and unpacks there byte for byte; a damaged or missing piece is named, never joined."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.scripts import load_script

KIB = 1024


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "sft_model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    (folder / "model.safetensors").write_bytes(os.urandom(70 * KIB))
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_round_trip_through_calls_and_carry_parts(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture) -> None:
    mp = load_script("gpu/model_parts")
    piece = 16 * KIB / mp.MIB
    assert mp.main(["pack", str(model), str(tmp_path / "ret"), "--piece-mib", str(piece)]) == 0
    names = sorted(p.name for p in (tmp_path / "ret").glob(mp.PREFIX + "*"))
    assert names == [f"sft-model.tar.part-{n:02d}" for n in range(len(names))] and len(names) == 5  # 74 KiB of tar
    assert mp.tar_bytes(model) == mp.tar_bytes(model)  # the same bytes each time: the sha256 names the weights

    assert mp.main(["send", str(tmp_path / "not-yet"), str(tmp_path / "early")]) == 0  # polled before the pack
    assert capsys.readouterr().out.endswith(f"nothing packed in {tmp_path / 'not-yet'} yet\n")
    assert not (tmp_path / "early").exists()
    calls = [tmp_path / "device" / f"{n}" for n in range(3)]
    for out in calls:  # at most 40 KiB a call here (60 MiB there): the manifest and 2 pieces, then 2, then 1
        assert mp.main(["send", str(tmp_path / "ret"), str(out), "--max-mib", str(40 * KIB / mp.MIB)]) == 0
    assert [sorted(p.name for p in out.iterdir()) for out in calls] == [
        ["SFT-MODEL.sha256", *names[:2]],
        names[2:4],
        names[4:],
    ]
    assert capsys.readouterr().out.splitlines()[-1] == f"sent 1 file(s), 0.0 MiB: {names[4]}; 0 left"

    back, carry = tmp_path / "here" / "sft_model", tmp_path / "here" / "sft-parts"
    args = ["collect", str(tmp_path / "device"), "--model", str(back), "--parts", str(carry)]
    assert mp.main([*args, "--part-mib", str(40 * KIB / mp.MIB)]) == 0
    assert files_of(back) == files_of(model)
    assert sorted(p.name for p in carry.iterdir()) == [mp.MANIFEST, "sft-model.tar.part-00", "sft-model.tar.part-01"]
    there = tmp_path / "there" / "sft_model"
    assert mp.main(["unpack", str(carry), str(there)]) == 0
    assert files_of(there) == files_of(model)


def test_a_damaged_or_missing_piece_is_named(tmp_path: Path, model: Path) -> None:
    mp = load_script("gpu/model_parts")
    parts = tmp_path / "parts"
    assert mp.main(["pack", str(model), str(parts), "--piece-mib", str(16 * KIB / mp.MIB)]) == 0
    (parts / "sft-model.tar.part-03").write_bytes(b"not the piece")
    with pytest.raises(SystemExit) as error:
        mp.main(["unpack", str(parts), str(tmp_path / "m")])
    assert (
        str(error.value)
        == f"{parts / 'sft-model.tar.part-03'}: sha256 does not match {parts / mp.MANIFEST}; bring that piece again"
    )
    (parts / "sft-model.tar.part-03").unlink()
    with pytest.raises(SystemExit) as error:
        mp.main(["unpack", str(parts), str(tmp_path / "m")])
    assert str(error.value) == f"1 of 5 pieces missing (first: sft-model.tar.part-03); {parts / mp.MANIFEST} lists them"
    assert not (tmp_path / "m").exists()
    with pytest.raises(SystemExit) as error:
        mp.main(["pack", str(tmp_path), str(parts)])
    assert str(error.value) == f"{tmp_path}: no config.json there; expected a saved model folder"


def test_carry_plan_takes_the_sft_group_instead_of_the_gguf(tmp_path: Path) -> None:
    cp = load_script("gpu/carry_plan")
    parts, sft = tmp_path / "parts", tmp_path / "sft-parts"
    parts.mkdir(), sft.mkdir()
    for folder, name in ((parts, "wheels.tar.part-00"), (parts, "gguf.part-00"), (parts, "MANIFEST.sha256"),
                         (parts, "WHOLE.sha256"), (sft, "sft-model.tar.part-00"), (sft, "sft-model.tar.part-01"),
                         (sft, "SFT-MODEL.sha256")):  # fmt: skip
        (folder / name).write_bytes(b"\0" * 1000)
    calls = cp.make_plan(parts, 2500, None, False, True, ("wheels", "sft"), sft)
    assert [[p.name for p in c["files"]] for c in calls] == [
        ["MANIFEST.sha256", "WHOLE.sha256", "SFT-MODEL.sha256"],  # 3,000 bytes: over the cap, a call of their own
        ["wheels.tar.part-00"],
        ["sft-model.tar.part-00", "sft-model.tar.part-01"],
    ]
    assert calls[-1]["install"].endswith("LONGFLOW_STEPS=wheels,check,sft bash scripts/gpu/install_on_gpu.sh")
    plain = cp.make_plan(parts, 2500, None, False, True, ("wheels", "sglang", "gguf"), sft)  # the default groups
    assert [[p.name for p in c["files"]] for c in plain] == [
        ["MANIFEST.sha256", "WHOLE.sha256"],
        ["wheels.tar.part-00"],
        ["gguf.part-00"],
    ]
    assert plain[-1]["install"].endswith("LONGFLOW_STEPS=wheels,check,model bash scripts/gpu/install_on_gpu.sh")
    (sft / "sft-model.tar.part-00").unlink(), (sft / "sft-model.tar.part-01").unlink()
    with pytest.raises(SystemExit) as error:
        cp.make_plan(parts, 2500, None, False, True, ("wheels", "sft"), sft)
    assert str(error.value) == f"no sft-model.tar.part-* in {sft}: run scripts/gpu/model_parts.py collect --parts first"


def test_many_pieces_join_in_the_manifests_order_and_a_short_call_is_sent_again(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture
) -> None:
    """Over 100 pieces (part-100 sorts before part-11 by name); a new pack starts sending from the first piece."""
    mp = load_script("gpu/model_parts")
    ret = tmp_path / "ret"
    assert mp.main(["pack", str(model), str(ret), "--piece-mib", str(512 / mp.MIB)]) == 0
    names = [line.split("  ")[1] for line in (ret / mp.MANIFEST).read_text().splitlines()][:-1]
    assert len(names) > 100 and sorted(names) != names
    assert mp.main(["unpack", str(ret), str(tmp_path / "m")]) == 0
    assert files_of(tmp_path / "m") == files_of(model)

    small = tmp_path / "small"
    assert mp.main(["pack", str(model), str(small), "--piece-mib", str(40 * KIB / mp.MIB)]) == 0
    assert mp.main(["send", str(small), str(tmp_path / "a")]) == 0
    assert mp.main(["send", str(small), str(tmp_path / "b")]) == 0  # nothing left
    assert mp.main(["send", str(small), str(tmp_path / "c"), "--again", "sft-model.tar.part-01"]) == 0
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["sft-model.tar.part-01"]
    assert mp.main(["pack", str(model), str(small), "--piece-mib", str(40 * KIB / mp.MIB)]) == 0  # packed again
    assert mp.main(["send", str(small), str(tmp_path / "d")]) == 0
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [
        mp.MANIFEST,
        "sft-model.tar.part-00",
        "sft-model.tar.part-01",
    ]
    assert capsys.readouterr().out.splitlines()[-1].endswith("; 0 left")
