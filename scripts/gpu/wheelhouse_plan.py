#!/usr/bin/env python3
"""Choose which wheels go to the GPU machine, and fetch them (run HERE, called by build_wheelhouse.sh).

    python scripts/gpu/wheelhouse_plan.py --closure closure.txt --roots scripts/gpu/requirements-gpu.in \
        --pyproject pyproject.toml --image scripts/gpu/gpu_image_packages.txt \
        --cache .whl-gpu/cache --wheels .whl-gpu/wheels --lock .whl-gpu/requirements-gpu.lock \
        --report .whl-gpu/plan-report.txt [--drop "flashinfer-cubin ..."] [--pip "/path/to/python -m pip"] \
        [--override scripts/gpu/overrides-sglang.txt] [--shared-lock .whl-gpu/requirements-gpu.lock]

Inputs: `closure.txt` is `uv pip compile` output for the roots (exact versions for CPython 3.12,
manylinux x86_64); the image list says which packages the GPU image has (and, where known, at
which version). We walk the requirement graph from the roots, reading Requires-Dist from the
wheels themselves (markers evaluated for CPython 3.12.3 on linux/x86_64, extras followed):

* a package the image does not have is carried (downloaded into --cache, linked into --wheels);
* a package the image has is NOT carried when every requirement on it (from the roots and from
  the carried packages) accepts the image's version; when the image's version is unknown ("?")
  we assume a recent release and keep the image's copy unless some requirement has an upper bound
  or a pin (==, <, <=, ~=, ===): then the resolved version is carried and shadows the image's;
* the torch stack (torch, torchvision, torchaudio, triton, cuda-toolkit and torch's nvidia-* CUDA
  runtime wheels) is never carried: a requirement the image's version does not meet is reported
  as a hard conflict;
* the image's own dependencies are its business: we do not walk into packages we do not carry.

--override FILE: requirements that replace every other requirement on the same name, as
`uv pip compile --override` does (the SGLang wheelhouse: transformers==5.9.0 replaces sglang
0.5.12's ==5.6.0); the replaced ones are listed in the report.
--shared-lock FILE: `name==version` pins that another wheelhouse (vLLM's) already carries: they
stay in this lock but are not linked into --wheels (install with --find-links to both houses).

Packages with no wheel (sdist only, e.g. antlr4-python3-runtime 4.9.3) are built here with
`pip wheel --no-deps`; the result must be pure Python (py3-none-any), else we stop.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

# Markers are evaluated for the GPU machine's interpreter (Python 3.12.3, Ubuntu, x86_64).
TARGET_ENV = {
    "implementation_name": "cpython",
    "implementation_version": "3.12.3",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.12.3",
    "python_version": "3.12",
    "sys_platform": "linux",
}

# The CUDA/torch stack of the image: never carried (torch 2.11.0+cu130 must stay the image's).
TORCH_STACK = {
    "torch", "torchvision", "torchaudio", "triton", "cuda-toolkit",
    "nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cudnn-cu13",
    "nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse",
    "nvidia-cusparselt-cu13", "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-nvshmem-cu13", "nvidia-nvtx",
}  # fmt: skip

# Platform tags accepted on the GPU machine (Ubuntu 24.04, glibc 2.39; pip matches N exactly).
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]

UPPER_OPS = {"==", "===", "<", "<=", "~="}


def read_closure(path: Path | None) -> dict[str, str]:
    pins: dict[str, str] = {}
    if path is None:
        return pins
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, ver = line.partition("==")
        pins[canonicalize_name(name.split("[")[0])] = ver.strip()
    return pins


def read_image(path: Path) -> dict[str, str | None]:
    image = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, ver = line.split()
            image[canonicalize_name(name)] = None if ver == "?" else ver
    return image


def read_roots(roots: Path, pyproject: Path | None) -> list[Requirement]:
    lines = [line.split("#", 1)[0].strip() for line in roots.read_text().splitlines()]
    reqs = [Requirement(line) for line in lines if line]
    if pyproject:
        reqs += [Requirement(r) for r in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    return reqs


def wheel_requires(whl: Path) -> list[Requirement]:
    """Requires-Dist of a wheel's own top-level .dist-info (not of vendored copies inside it)."""
    with zipfile.ZipFile(whl) as z:
        metas = [n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(metas) != 1:
            raise SystemExit(f"{whl.name}: expected one top-level METADATA, found {metas}")
        text = z.read(metas[0]).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]  # headers end at the first blank line
    return [Requirement(h.split(":", 1)[1].strip()) for h in head.splitlines() if h.startswith("Requires-Dist:")]


def applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**TARGET_ENV, "extra": e}) for e in ({""} | extras))


class Fetcher:
    def __init__(self, pip: list[str], cache: Path):
        self.pip, self.cache = pip, cache
        cache.mkdir(parents=True, exist_ok=True)

    def find(self, name: str, ver: str) -> Path | None:
        for f in self.cache.glob("*.whl"):
            n, v, _, _ = parse_wheel_filename(f.name)
            if n == name and v == Version(ver):
                return f
        return None

    def fetch(self, pins: list[tuple[str, str]]) -> None:
        todo = [(n, v) for n, v in pins if self.find(n, v) is None]
        if not todo:
            return
        base = self.pip + ["download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                           "--implementation", "cp", "--abi", "cp312", "-d", str(self.cache)]  # fmt: skip
        for p in PLATFORMS:
            base += ["--platform", p]
        print(f"  downloading {len(todo)} wheel(s): {' '.join(n for n, _ in todo)}", flush=True)
        nowheel = []
        while todo:
            res = subprocess.run(base + [f"{n}=={v}" for n, v in todo], capture_output=True, text=True)
            if res.returncode == 0:
                break
            # pip stops at the first requirement with no usable wheel: set it aside and go on.
            missing = {
                canonicalize_name(m)
                for m in re.findall(r"No matching distribution found for ([A-Za-z0-9._-]+)", res.stderr)
            }
            if not missing & {n for n, _ in todo}:
                sys.stderr.write(res.stderr)
                raise SystemExit("pip download failed")
            nowheel += [(n, v) for n, v in todo if n in missing]
            todo = [(n, v) for n, v in todo if n not in missing]
        for n, v in nowheel:
            print(f"  no wheel for {n}=={v}: building it here (must be pure Python)", flush=True)
            subprocess.run(self.pip + ["wheel", "-q", "--no-deps", "-w", str(self.cache), f"{n}=={v}"], check=True)
            built = self.find(n, v)
            if built is None or not built.name.endswith("-py3-none-any.whl"):
                raise SystemExit(f"{n}=={v}: no cp312 manylinux wheel and no pure-Python build ({built})")


def plan(args) -> int:
    pins = read_closure(args.closure)
    image = read_image(args.image)
    roots = read_roots(args.roots, args.pyproject)
    drop = {canonicalize_name(d) for d in args.drop.split()}
    overrides = {canonicalize_name(r.name): r for r in read_roots(args.override, None)} if args.override else {}
    shared = read_closure(args.shared_lock)
    replaced: list[tuple[str, Requirement]] = []  # requirements an override replaced
    fetcher = Fetcher(args.pip, args.cache)

    constraints: dict[str, list[tuple[str, Requirement]]] = defaultdict(list)  # name -> [(who, req)]
    extras: dict[str, set[str]] = defaultdict(set)
    carried: dict[str, str] = {}  # name -> version
    kept: dict[str, str] = {}  # image package used as is -> reason
    dropped: set[str] = set()
    expanded: dict[str, frozenset[str]] = {}  # carried name -> extras already expanded

    def add(who: str, req: Requirement) -> None:
        n = canonicalize_name(req.name)
        extras[n] |= set(req.extras)
        if n in overrides and who != "(override)":
            replaced.append((who, req))
            return
        constraints[n].append((who, req))

    for r in overrides.values():
        add("(override)", r)
    for r in roots:
        add("(roots)", r)

    def decide(n: str) -> str:
        """'carry', 'image' or 'drop' for package n given the constraints seen so far."""
        if n in drop:
            return "drop"
        if n in TORCH_STACK:
            return "image"
        if n not in image:
            return "carry"
        spec = SpecifierSet()
        for _, r in constraints[n]:
            spec &= r.specifier
        iv = image[n]
        if iv is not None:
            return "image" if spec.contains(iv, prereleases=True) else "carry"
        return "carry" if any(s.operator in UPPER_OPS for s in spec) else "image"

    while True:
        # (Re)decide every name seen so far; a decision to carry is final.
        wanted = []
        for n in list(constraints):
            if n in carried:
                if expanded.get(n) != frozenset(extras[n]):
                    wanted.append(n)  # new extras requested: read its requirements again
                continue
            d = decide(n)
            if d == "carry":
                if n not in pins:
                    raise SystemExit(f"{n} is required ({constraints[n]}) but absent from the resolved closure")
                carried[n] = pins[n]
                kept.pop(n, None)
                wanted.append(n)
            elif d == "drop":
                dropped.add(n)
            else:
                kept[n] = "image"
        if not wanted:
            break
        fetcher.fetch([(n, carried[n]) for n in wanted])
        for n in wanted:
            before = expanded.get(n)
            for r in wheel_requires(fetcher.find(n, carried[n])):
                if applies(r, extras[n]) and not (before is not None and applies(r, set(before))):
                    add(f"{n}=={carried[n]}", r)
            expanded[n] = frozenset(extras[n])

    # Hard conflicts: a kept image package whose known version some requirement rejects.
    report = []
    conflicts = []
    for n in sorted(kept):
        spec = SpecifierSet()
        for _, r in constraints[n]:
            spec &= r.specifier
        iv = image.get(n)
        if iv is not None and not spec.contains(iv, prereleases=True):
            conflicts.append(f"{n}: image has {iv}, required {spec} by {sorted({w for w, _ in constraints[n]})}")

    # Link the chosen wheels into the wheelhouse.
    if args.wheels.exists():
        shutil.rmtree(args.wheels)
    args.wheels.mkdir(parents=True)
    lock = []
    for n in sorted(carried):
        lock.append(f"{n}=={carried[n]}")
        if shared.get(n) == carried[n]:
            continue  # the other wheelhouse carries this very wheel
        src = fetcher.find(n, carried[n])
        try:
            os.link(src, args.wheels / src.name)
        except OSError:
            shutil.copy2(src, args.wheels / src.name)
    args.lock.write_text("\n".join(lock) + "\n")

    def why(n: str) -> str:
        spec = SpecifierSet()
        for _, r in constraints[n]:
            spec &= r.specifier
        by = sorted({w for w, _ in constraints[n]})
        return f"requires '{spec or 'any'}' (from {', '.join(by[:4])}{' ...' if len(by) > 4 else ''})"

    size = lambda n: fetcher.find(n, carried[n]).stat().st_size  # noqa: E731
    own = [n for n in carried if shared.get(n) != carried[n]]
    report.append(f"# wheelhouse plan: {len(carried)} wheels carried, {sum(map(size, carried)) / 2**20:.1f} MiB")
    if args.shared_lock:
        report.append(
            f"# {len(carried) - len(own)} of them already in {args.shared_lock} (not carried twice); "
            f"this wheelhouse's own: {len(own)} wheels, {sum(map(size, own)) / 2**20:.1f} MiB"
        )
    report.append("\n## carried because the image has them at another (or unknown, bounded) version")
    for n in sorted(n for n in carried if n in image):
        report.append(f"{n}=={carried[n]}  (image: {image[n] or '?'}; {why(n)})")
    report.append("\n## NOT carried: the image's copy is used")
    for n in sorted(kept):
        tag = (
            "torch stack"
            if n in TORCH_STACK
            else ("version known" if image.get(n) else "version unknown: check_env.py verifies it there")
        )
        report.append(f"{n}  (image: {image.get(n) or '?'}, resolved here: {pins.get(n, '-')}; {tag}; {why(n)})")
    if dropped:
        report.append("\n## dropped on request (--drop / LONGFLOW_DROP): NOT carried, NOT verified")
        for n in sorted(dropped):
            report.append(f"{n}=={pins.get(n, '?')}  ({why(n)})")
    if replaced:
        report.append("\n## requirements replaced by --override")
        for who, r in replaced:
            report.append(f"{r}  (from {who}; replaced by {overrides[canonicalize_name(r.name)]})")
    report.append("\n## hard conflicts (torch stack / known image versions that a requirement rejects)")
    report += conflicts or ["none"]
    unused = sorted(set(pins) - set(carried) - set(kept) - dropped)
    report.append("\n## in the resolved closure but reached only through the image's own packages (not carried)")
    report.append(", ".join(unused) or "none")
    report.append("\n## carried wheels, largest first")
    for n in sorted(own, key=size, reverse=True):
        report.append(f"{size(n) / 2**20:8.1f} MiB  {fetcher.find(n, carried[n]).name}")
    args.report.write_text("\n".join(report) + "\n")
    print("\n".join(report[: 4 if args.shared_lock else 3]))
    print(f"wrote {args.lock} ({len(lock)} pins) and {args.report}")
    return 1 if conflicts and args.strict else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--closure", type=Path, required=True)
    ap.add_argument("--roots", type=Path, required=True)
    ap.add_argument("--pyproject", type=Path)
    ap.add_argument("--image", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--wheels", type=Path, required=True)
    ap.add_argument("--lock", type=Path, required=True)
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--drop", default="", help="space-separated package names never to carry")
    ap.add_argument("--override", type=Path, help="requirements replacing every other one on their names")
    ap.add_argument("--shared-lock", type=Path, help="pins another wheelhouse carries: kept in the lock, not linked")
    ap.add_argument("--strict", action="store_true", help="exit 1 on a hard conflict")
    ap.add_argument("--pip", default=f"{sys.executable} -m pip", help="pip command line (default: this python's)")
    args = ap.parse_args()
    args.pip = shlex.split(args.pip)
    return plan(args)


if __name__ == "__main__":
    sys.exit(main())
