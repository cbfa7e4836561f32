#!/usr/bin/env python3
"""Bring a model folder back from the GPU machine and carry it there again, as checked parts.

A fine-tuned warm start (``/tmp/sft_model``, ~1 GB) dies with the machine, and a call brings back at most 8 files of
16 MiB (64 MiB together). So the machine packs it into pieces, a few device calls bring them back, and later holds
carry the same weights instead of fine-tuning again: the same start in every hold (the sha256 says so), and ~3.5 min
of a hold saved (GGUF conversion, demonstrations, fine-tuning).

    # there (GPU), once the model is saved:
    python3 scripts/gpu/model_parts.py pack /tmp/sft_model /tmp/sft_return            # 15 MiB pieces + SFT-MODEL.sha256
    python3 scripts/gpu/model_parts.py send /tmp/sft_return "$OUT"                    # each call: the next 62 MiB
    # here, after the calls:
    python3 scripts/gpu/model_parts.py collect FILES_AT... --model .whl-gpu/sft_model --parts .whl-gpu/sft-parts
    python3 scripts/gpu/carry_plan.py --groups wheels,sft --stage                     # the model instead of the GGUF
    # there, in a later hold (install_on_gpu.sh step `sft`):
    python3 scripts/gpu/model_parts.py unpack /tmp/longflow-parts /tmp/sft_model

Pieces are ``sft-model.tar.part-NN`` of one uncompressed tar of the folder (bf16 weights do not compress);
``SFT-MODEL.sha256`` lists each piece's sha256 and the whole tar's. Every step checks them and names what is wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import sys
import tarfile
from pathlib import Path

PREFIX = "sft-model.tar.part-"
WHOLE = "sft-model.tar"
MANIFEST = "SFT-MODEL.sha256"
MIB = 1 << 20


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tar_bytes(folder: Path) -> bytes:
    """The folder's files as one uncompressed tar, in name order, with fixed owners and times (same bytes each time)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with path.open("rb") as f:
                tar.addfile(info, f)
    return buffer.getvalue()


def write_pieces(whole: bytes, out: Path, piece_bytes: int) -> list[str]:
    """``whole`` as pieces of ``piece_bytes`` in ``out``, with the manifest; the piece names."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob(PREFIX + "*"), *out.glob(".sent")]:  # a new pack is sent from the start
        old.unlink()
    names, lines = [], []
    for n, start in enumerate(range(0, len(whole), piece_bytes)):
        name, piece = f"{PREFIX}{n:02d}", whole[start : start + piece_bytes]
        (out / name).write_bytes(piece)
        names.append(name)
        lines.append(f"{sha256(piece)}  {name}")
    lines.append(f"{sha256(whole)}  {WHOLE}")
    (out / MANIFEST).write_text("\n".join(lines) + "\n")
    return names


def read_manifest(path: Path) -> dict[str, str]:
    entries = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise SystemExit(f"{path}:{number}: expected '<sha256>  <name>', got {line!r}")
        entries[name] = digest
    if WHOLE not in entries:
        raise SystemExit(f"{path}: no line for {WHOLE} (the whole tar's sha256)")
    return entries


def join_pieces(found: dict[str, Path], manifest: Path) -> bytes:
    """The whole tar from the pieces in ``found`` (name -> path), each and the whole checked against ``manifest``."""
    expected = read_manifest(manifest)
    pieces = [name for name in expected if name != WHOLE]  # the manifest's order is the tar's
    missing = [name for name in pieces if name not in found]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(pieces)} pieces missing (first: {missing[0]}); {manifest} lists them")
    chunks = []
    for name in pieces:
        data = found[name].read_bytes()
        if sha256(data) != expected[name]:
            raise SystemExit(f"{found[name]}: sha256 does not match {manifest}; bring that piece again")
        chunks.append(data)
    whole = b"".join(chunks)
    if sha256(whole) != expected[WHOLE]:
        raise SystemExit(f"the joined pieces do not match {WHOLE}'s sha256 in {manifest}")
    return whole


def extract(whole: bytes, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        tar.extractall(dest, filter="data")


def pack(args: argparse.Namespace) -> int:
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"{args.model}: no config.json there; expected a saved model folder")
    whole = tar_bytes(args.model)
    names = write_pieces(whole, args.out, int(args.piece_mib * MIB))
    print(
        f"packed {args.model} ({len(whole)} bytes, sha256 {sha256(whole)[:16]}) into {len(names)} pieces in {args.out}"
    )
    return 0


def send(args: argparse.Namespace) -> int:
    """Copy the next unsent pieces (and the manifest, first) to ``out``, within one call's limits."""
    if not (args.src / MANIFEST).is_file():  # a poll before the fine-tuning ended: nothing to send, no failure
        print(f"nothing packed in {args.src} yet")
        return 0
    sent_list = args.src / ".sent"
    sent = set(sent_list.read_text().split()) if sent_list.exists() else set()
    sent -= set(args.again)  # pieces whose call did not bring them back
    queue = [p for p in sorted(args.src.glob(PREFIX + "*")) if p.name not in sent]
    if MANIFEST not in sent:
        queue.insert(0, args.src / MANIFEST)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen, total = [], 0
    for p in queue:
        if len(chosen) == args.max_files or total + p.stat().st_size > args.max_mib * MIB:
            break
        shutil.copy2(p, args.out / p.name)
        chosen.append(p.name)
        total += p.stat().st_size
    sent_list.write_text("".join(f"{name}\n" for name in [*sorted(sent), *chosen]))
    left = len(queue) - len(chosen)
    print(f"sent {len(chosen)} file(s), {total / MIB:.1f} MiB: {' '.join(chosen) or '-'}; {left} left")
    return 0


def collect(args: argparse.Namespace) -> int:
    """Pieces from the device calls' folders (newest copy of each name), checked, joined, unpacked and re-split."""
    found: dict[str, Path] = {}
    copies = [p for root in args.dirs for pattern in (PREFIX + "*", MANIFEST) for p in root.rglob(pattern)]
    for p in sorted(copies, key=lambda p: p.stat().st_mtime):  # the newest copy of a name wins
        found[p.name] = p
    if MANIFEST not in found:
        raise SystemExit(f"no {MANIFEST} under {', '.join(map(str, args.dirs))}: the first send brings it")
    whole = join_pieces(found, found[MANIFEST])
    extract(whole, args.model)
    names = write_pieces(whole, args.parts, int(args.part_mib * MIB)) if args.parts else []
    where = f"; {len(names)} carry parts in {args.parts}" if names else ""
    print(f"model in {args.model} (sha256 {sha256(whole)[:16]}){where}")
    return 0


def unpack(args: argparse.Namespace) -> int:
    manifest = args.parts / MANIFEST
    if not manifest.is_file():
        raise SystemExit(f"{manifest} missing: carry the sft group (python3 scripts/gpu/carry_plan.py)")
    found = {p.name: p for p in args.parts.glob(PREFIX + "*")}
    whole = join_pieces(found, manifest)
    extract(whole, args.model)
    print(f"model in {args.model} (sha256 {sha256(whole)[:16]})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="(there) a model folder into pieces + manifest")
    p.add_argument("model", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--piece-mib", type=float, default=15.0, help="piece size (a call brings back files of <= 16 MiB)")
    p.set_defaults(run=pack)
    p = sub.add_parser("send", help="(there) the next unsent pieces into $OUT")
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--max-mib", type=float, default=62.0, help="per call (the limit: 64 MiB, 8 files of 16 MiB)")
    p.add_argument("--max-files", type=int, default=7)
    p.add_argument(
        "--again", nargs="+", default=[], metavar="NAME", help="send these again (a call that came back short)"
    )
    p.set_defaults(run=send)
    p = sub.add_parser("collect", help="(here) join the pieces the calls brought back")
    p.add_argument(
        "dirs",
        type=Path,
        nargs="+",
        help="folders holding the calls' files (the device tool's files_at, or a folder above them)",
    )
    p.add_argument("--model", type=Path, required=True, help="where the model folder goes")
    p.add_argument("--parts", type=Path, help="also write carry parts here (e.g. .whl-gpu/parts)")
    p.add_argument("--part-mib", type=float, default=58.0, help="carry part size (with the tree, <= 64 MiB a call)")
    p.set_defaults(run=collect)
    p = sub.add_parser("unpack", help="(there) join carried parts into the model folder")
    p.add_argument("parts", type=Path)
    p.add_argument("model", type=Path)
    p.set_defaults(run=unpack)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
