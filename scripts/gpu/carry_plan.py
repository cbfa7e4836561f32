#!/usr/bin/env python3
"""Plan and stage the device calls that carry .whl-gpu/parts/ to the GPU machine (run HERE).

    python3 scripts/gpu/carry_plan.py             # print the calls: files, sizes, carry, command
    python3 scripts/gpu/carry_plan.py --stage     # also hard-link each call's files into .whl-gpu/carry/NN/
    python3 scripts/gpu/carry_plan.py --only gguf.part-04 wheels.tar.part-11 --stage   # re-carry some parts
    python3 scripts/gpu/carry_plan.py --json      # the same plan, machine-readable
    python3 scripts/gpu/carry_plan.py --stage --with outputs/data/gsm8k_learn \
      --start 'WAVES="D G" bash scripts/gpu/background.sh setup bash scripts/gpu/scale_hold.sh'
        # a hold script that installs itself: the last call carries the data too and starts the script instead

Every call's files are staged beforehand, each call in its own folder .whl-gpu/carry/NN (git
ignores .whl-gpu/), so the device calls can follow each other with nothing run here in between:
the machine goes back after 30 s idle (and after 30 min held), and /tmp goes with it. Call NN
names `.whl-gpu/carry/NN` in the device tool's `carry` and runs
`mkdir -p /tmp/longflow-parts && cp .whl-gpu/carry/NN/* /tmp/longflow-parts/`.

Order: the wheel parts first (call 1 also holds the two manifests); then the SGLang wheel parts when the build
made them (LONGFLOW_ENGINES=...,sglang); then the GGUF parts. The last call also starts every install step
(wheels,check[,sglang,check-sglang],model) in the background (scripts/gpu/background.sh) and returns at once;
poll it with `bash scripts/gpu/background.sh --status 240 setup`. Each group is packed first-fit-decreasing into calls of at most --max-mib (60) MiB; wheel
parts and GGUF parts are separate files, so either group can go first (--gguf-first).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
TREE_LIMIT = 64 * MIB  # the device tool's limit per call: working tree + carried paths
SFT_MANIFEST = "SFT-MODEL.sha256"  # the sft group's (scripts/gpu/model_parts.py)
MANIFESTS = ("MANIFEST.sha256", "WHOLE.sha256", SFT_MANIFEST)
CARRY_ROOT = ".whl-gpu/carry"
REMOTE = "/tmp/longflow-parts"
GROUPS = {
    "wheels": "wheels.tar.part-",
    "sglang": "sglang-wheels.tar.part-",
    "gguf": "gguf.part-",
    "sft": "sft-model.tar.part-",  # a warm start brought back from a hold (scripts/gpu/model_parts.py)
}
SFT_PARTS = ".whl-gpu/sft-parts"  # model_parts.py collect --parts: kept apart, build_wheelhouse.sh clears parts/
STEPS = {"wheels": "wheels,check", "sglang": "sglang,check-sglang", "gguf": "model", "sft": "sft"}
SETUP = "bash scripts/gpu/background.sh setup env LONGFLOW_STEPS={steps} bash scripts/gpu/install_on_gpu.sh"
"""The last call's extra step: every install step, started in the background (the call returns at once; poll
with ``bash scripts/gpu/background.sh --status 240 setup``). A long install in the call itself left the machine
idle for more than 30 s before the next call, more than once."""


def call_cap(tree_bytes: int) -> int:
    """The most bytes one call may carry beside a working tree of ``tree_bytes`` (and half a MiB of room)."""
    return TREE_LIMIT - tree_bytes - MIB // 2


def working_tree_bytes() -> int:
    """Bytes that travel with every call: tracked + untracked-not-ignored files."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO, capture_output=True, check=True).stdout  # fmt: skip
    total = 0
    for name in filter(None, out.split(b"\0")):
        p = REPO / os.fsdecode(name)
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def pack(files: list[Path], cap: int) -> list[list[Path]]:
    """First fit decreasing; bins keep name order inside."""
    bins: list[list[Path]] = []
    for p in sorted(files, key=lambda p: (-p.stat().st_size, p.name)):
        if p.stat().st_size > cap:
            raise SystemExit(
                f"{p.name}: {p.stat().st_size / MIB:.1f} MiB > {cap / MIB:.0f} MiB; rebuild with a smaller PART_SIZE"
            )
        for b in bins:
            if sum(q.stat().st_size for q in b) + p.stat().st_size <= cap:
                b.append(p)
                break
        else:
            bins.append([p])
    for b in bins:
        b.sort(key=lambda p: p.name)
    return sorted(bins, key=lambda b: b[0].name)


def make_plan(
    parts: Path,
    cap: int,
    only: list[str] | None,
    gguf_first: bool,
    install: bool,
    groups: tuple[str, ...] = ("wheels", "sglang", "gguf"),
    sft_parts: Path | None = None,
) -> list[dict]:
    folders = [parts, *([sft_parts] if "sft" in groups and sft_parts else [])]
    files = {p.name: p for folder in folders if folder.is_dir() for p in folder.iterdir() if p.is_file()}
    if "sft" in groups and not any(n.startswith(GROUPS["sft"]) for n in files):
        raise SystemExit(f"no {GROUPS['sft']}* in {sft_parts}: run scripts/gpu/model_parts.py collect --parts first")
    wanted = set(only) if only else set(files)
    if only and set(only) - set(files):
        raise SystemExit(f"not in {parts}: {sorted(set(only) - set(files))}")
    order = [g for g in (["gguf", "wheels", "sglang", "sft"] if gguf_first else list(GROUPS)) if g in groups]
    calls: list[dict] = []
    manifests = [files[m] for m in MANIFESTS if m in wanted and m in files and ("sft" in groups or m != SFT_MANIFEST)]
    for group in order:
        group_files = [p for n, p in files.items() if n.startswith(GROUPS[group]) and n in wanted]
        if not group_files:
            continue
        bins = pack(group_files, cap)
        if manifests and not calls:  # manifests ride in the first call that has room
            small = sum(p.stat().st_size for p in manifests)
            room = [b for b in bins if sum(p.stat().st_size for p in b) + small <= cap]
            target = room[0] if room else None
            if target is None:
                bins.insert(0, [])
                target = bins[0]
            target[:0] = manifests
            bins.remove(target)
            bins.insert(0, target)
            manifests = []
        for b in bins:
            calls.append({"group": group, "files": b, "install": None})
    if manifests:  # only manifests asked for
        calls.insert(0, {"group": "manifests", "files": manifests, "install": None})
    if calls and install and not only:
        steps = ",".join(STEPS[g] for g in GROUPS if any(c["group"] == g for c in calls))
        calls[-1]["install"] = SETUP.format(steps=steps)
    expected = 0
    for n, c in enumerate(calls, 1):
        expected += len(c["files"])
        c["n"], c["expected"] = n, expected
        c["bytes"] = sum(p.stat().st_size for p in c["files"])
        c["carry"] = f"{CARRY_ROOT}/{'redo-' if only else ''}{n:02d}"
        c["command"] = (f"mkdir -p {REMOTE} && cp {c['carry']}/* {REMOTE}/ && echo \"call {n}/{len(calls)}: "
                        f"$(ls {REMOTE} | wc -l) files in {REMOTE}, {'at least ' if only else ''}{expected} expected\"")  # fmt: skip
        c["also"] = []
        if c["install"]:
            c["command"] += " && " + c["install"]
    return calls


def path_bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def last_step(calls: list[dict], cap: int, start: str | None, also: list[str]) -> list[dict]:
    """The last call starts ``start`` in place of the install (a hold script that installs itself) and carries the
    paths ``also`` (a run's data, ignored by git) beside its parts; without room for them, a call of its own follows."""
    if not calls or (start is None and not also):
        return calls
    extra = sum(path_bytes(REPO / a) for a in also)
    if extra > cap:
        raise SystemExit(f"--with {' '.join(also)}: {extra / MIB:.1f} MiB, more than a call carries ({cap / MIB:.1f})")
    last = calls[-1]
    step = start if start is not None else last["install"]
    if last["install"]:  # the step is added again below, to this call or to the one after it
        last["command"], last["install"] = last["command"].removesuffix(f" && {last['install']}"), None
    if last["bytes"] + extra > cap:  # the paths and the step go in a call of their own
        last = {"n": last["n"] + 1, "group": "with", "files": [], "bytes": 0, "expected": last["expected"],
                "carry": None, "command": f"echo \"call {last['n'] + 1}: {' '.join(also)}\""}  # fmt: skip
        calls.append(last)
    last["install"], last["also"] = step, list(also)
    last["bytes"] += extra
    if step:
        last["command"] += f" && {step}"
    return calls


def stage(calls: list[dict], only: bool) -> None:
    root = REPO / CARRY_ROOT
    if root.exists():
        for d in root.iterdir():  # keep the other kind (plan vs redo) untouched
            if d.name.startswith("redo-") == only:
                shutil.rmtree(d)
    for c in calls:
        if c["carry"] is None:  # a call of --with paths alone
            continue
        dest = REPO / c["carry"]
        dest.mkdir(parents=True, exist_ok=True)
        for p in c["files"]:
            try:
                os.link(p, dest / p.name)
            except OSError:
                shutil.copy2(p, dest / p.name)
    if subprocess.run(["git", "check-ignore", "-q", CARRY_ROOT + "/x"], cwd=REPO).returncode != 0:
        raise SystemExit(f"{CARRY_ROOT} is not ignored by git: it would travel as working tree")
    print(f"staged {len(calls)} call folder(s) under {CARRY_ROOT}/ (hard links, no extra disk)\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=Path, default=REPO / ".whl-gpu" / "parts")
    ap.add_argument(
        "--max-mib",
        type=float,
        default=None,
        help="most MiB carried a call (default: 64 MiB less the working tree and 0.5 MiB of room)",
    )
    ap.add_argument("--only", nargs="+", metavar="PART", help="only these part names (re-carry after a fresh machine)")
    ap.add_argument("--stage", action="store_true", help="hard-link each call's files into .whl-gpu/carry/NN/")
    ap.add_argument("--gguf-first", action="store_true")
    ap.add_argument(
        "--groups",
        default="wheels,sglang,gguf",
        help="which groups to carry (wheels, sglang, gguf, sft); e.g. wheels,sft: a carried warm start, no GGUF",
    )
    ap.add_argument("--sft-parts", type=Path, default=REPO / SFT_PARTS, help="where the sft group's parts are")
    ap.add_argument("--no-install", action="store_true", help="no install_on_gpu.sh in the last call")
    ap.add_argument("--start", help="the last call's step instead of the install (a hold script that installs itself)")
    ap.add_argument(
        "--with", dest="also", nargs="+", default=[], metavar="PATH", help="paths the last call carries too"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.parts.is_dir():
        raise SystemExit(f"{args.parts} missing: run bash scripts/gpu/build_wheelhouse.sh first")

    tree = working_tree_bytes()
    cap = int(args.max_mib * MIB) if args.max_mib is not None else call_cap(tree)
    groups = tuple(args.groups.split(","))
    if set(groups) - set(GROUPS):
        raise SystemExit(
            f"--groups {args.groups}: unknown {sorted(set(groups) - set(GROUPS))}; valid: {', '.join(GROUPS)}"
        )
    calls = make_plan(args.parts, cap, args.only, args.gguf_first, not args.no_install, groups, args.sft_parts)
    calls = last_step(calls, cap, args.start, args.also)
    total = sum(c["bytes"] for c in calls)
    if args.stage:
        stage(calls, bool(args.only))
    if args.json:
        out = [
            {**c, "files": [p.name for p in c["files"]], "over_limit": c["bytes"] + tree > TREE_LIMIT} for c in calls
        ]
        print(json.dumps({"total_bytes": total, "working_tree_bytes": tree, "calls": out}, indent=1))
        return 0

    print(f"{len(calls)} device calls carry {total / MIB:.1f} MiB ({total} bytes) from {args.parts}")
    print(
        f"working tree travelling with each call: {tree / MIB:.2f} MiB (limit: {TREE_LIMIT // MIB} MiB with the carried folder)"
    )
    print(f'call N: run(carry=["{CARRY_ROOT}/NN"], command=...) with the command below; back to back, nothing')
    print("in between (30 s idle gives the machine back, and /tmp with it).\n")
    over = False
    for c in calls:
        flag = ""
        if c["bytes"] + tree > TREE_LIMIT:
            flag, over = "  <-- OVER 64 MiB WITH THE WORKING TREE", True
        carry = ",".join(filter(None, [c["carry"], *c["also"]]))
        print(
            f"call {c['n']:2d}  {c['bytes'] / MIB:5.1f} MiB  carry={carry}  {' '.join(p.name for p in c['files'])}{flag}"
        )
        if c["install"]:
            print(f"         then, same call (it returns at once): {c['install']}")
    print("\ncommands:")
    for c in calls:
        print(f"  {c['n']:2d}: {c['command']}")
    if not args.stage:
        print("\n(not staged yet: add --stage)")
    if over:
        print(
            "\nWARNING: some calls exceed 64 MiB with the working tree: rebuild with a smaller PART_SIZE (build_wheelhouse.sh)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
