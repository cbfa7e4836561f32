#!/usr/bin/env python3
"""Check the carried stack on the GPU machine: pins, shadowing, requirements, imports.

    source /tmp/longflow-env.sh      # PYTHONPATH=/tmp/site first (install_on_gpu.sh writes it)
    python3 scripts/gpu/check_env.py --lock /tmp/longflow/house/requirements-gpu.lock \
        --site /tmp/site [--imports] [--strict]
    source /tmp/longflow-env-sglang.sh   # the SGLang stack (its own --target, /tmp/site-sglang)
    python3 scripts/gpu/check_env.py --engine sglang --lock /tmp/longflow/house-sglang/requirements-sglang.lock \
        --site /tmp/site-sglang --override scripts/gpu/overrides-sglang.txt --imports

1. every name==version of the lock is what Python finds first (so /tmp/site wins), from --site;
2. torch is the IMAGE's (2.11.x, not under --site) and transformers is the carried 5.10.x
   (5.9.x with --engine sglang);
3. walks Requires-Dist from every locked package through everything it reaches (the image's
   packages too), with this interpreter's markers, and lists each requirement the found version
   does not meet ("PROBLEM"); prints the versions found for the image's packages ("image
   versions"), which is what scripts/gpu/gpu_image_packages.txt marks "?"; a requirement on a
   name in --override is met when the --override requirement is (printed as "OVERRIDDEN");
4. --imports: imports torch, transformers, tokenizers, numpy, ray, the engine, verl and our plugin, and
   prints where each came from.
Exit status 1 with --strict when 1 or 2 fails or step 3 found a problem.
Runs here too (with any environment), as a dry check of the script itself.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import sys
import time
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# transformers each stack carries: vllm's 5.10.4 (verl 0.9.1: <5.11, !=5.6.0); sglang's 5.9.0 (verl's sglang extra)
TRANSFORMERS = {"vllm": "5.10.", "sglang": "5.9."}


def dist_or_none(name: str):
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def where(dist) -> str:
    return str(Path(dist.locate_file("")).resolve())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lock", required=True, type=Path)
    ap.add_argument("--site", default="/tmp/site")
    ap.add_argument("--imports", action="store_true")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--engine", choices=sorted(TRANSFORMERS), default="vllm", help="the stack's rollout engine")
    ap.add_argument("--override", type=Path, help="uv-style overrides the stack was resolved with")
    args = ap.parse_args()
    overrides = {}
    for line in args.override.read_text().splitlines() if args.override else []:
        if line.split("#", 1)[0].strip():
            r = Requirement(line.split("#", 1)[0].strip())
            overrides[canonicalize_name(r.name)] = r
    site = str(Path(args.site).resolve())
    errors: list[str] = []
    print(f"python {sys.version.split()[0]} at {sys.executable}; sys.path[:4] = {sys.path[:4]}")

    # 1. pins
    pins = {}
    for line in args.lock.read_text().split():
        name, _, ver = line.partition("==")
        pins[canonicalize_name(name)] = ver
    bad = []
    for name, ver in sorted(pins.items()):
        d = dist_or_none(name)
        if d is None:
            bad.append(f"{name}: not found")
        elif d.version != ver or not where(d).startswith(site):
            bad.append(f"{name}: found {d.version} at {where(d)}, locked {ver} in {site}")
    print(f"[pins] {len(pins) - len(bad)}/{len(pins)} locked packages found at the locked version in {site}")
    errors += [f"pin: {b}" for b in bad]
    for b in bad:
        print(f"  PROBLEM {b}")

    # 2. shadowing
    torch_d, tf_d = dist_or_none("torch"), dist_or_none("transformers")
    if torch_d is None or where(torch_d).startswith(site) or not torch_d.version.startswith("2.11."):
        errors.append(f"torch must be the image's 2.11.x: {torch_d and (torch_d.version, where(torch_d))}")
    tf_want = TRANSFORMERS[args.engine]
    if tf_d is None or not where(tf_d).startswith(site) or not tf_d.version.startswith(tf_want):
        errors.append(f"transformers must be the carried {tf_want}x: {tf_d and (tf_d.version, where(tf_d))}")
    print(f"[shadow] torch {torch_d and torch_d.version} from {torch_d and where(torch_d)}")
    print(f"[shadow] transformers {tf_d and tf_d.version} from {tf_d and where(tf_d)}")

    # 3. requirement walk
    env = default_environment()
    todo = [(n, frozenset()) for n in pins]
    seen: dict[str, set[str]] = {}
    problems, image_found = [], {}
    while todo:
        name, extras = todo.pop()
        if name in seen and extras <= seen[name]:
            continue
        seen.setdefault(name, set()).update(extras)
        d = dist_or_none(name)
        if d is None:
            continue
        if not where(d).startswith(site):
            image_found[name] = (d.version, where(d))
        for raw in d.requires or []:
            r = Requirement(raw)
            if r.marker and not any(r.marker.evaluate({**env, "extra": e}) for e in {"", *seen[name]}):
                continue
            dep = canonicalize_name(r.name)
            got = dist_or_none(dep)
            if dep in overrides and got is not None and overrides[dep].specifier.contains(got.version):
                print(f"  OVERRIDDEN {name} {d.version} needs {r} : found {got.version}, as {overrides[dep]} says")
            elif got is None:
                problems.append(f"{name} {d.version} needs {r} : MISSING")
            elif r.specifier and not r.specifier.contains(got.version, prereleases=True):
                side = "carried" if where(got).startswith(site) else "image"
                problems.append(f"{name} {d.version} needs {r} : found {got.version} ({side})")
            todo.append((dep, frozenset(r.extras)))
    print(f"[requires] walked {len(seen)} distributions, {len(problems)} unmet requirement(s)")
    for p in sorted(set(problems)):
        print(f"  PROBLEM {p}")
    errors += problems
    print("[image versions] packages used from the image (name version location):")
    for name, (ver, loc) in sorted(image_found.items()):
        print(f"  {name} {ver} {loc}")

    # 4. imports
    if args.imports:
        for mod in [
            "torch",
            "numpy",
            "tokenizers",
            "transformers",
            "ray",
            args.engine,
            "verl",
            "extensions.plugin",
            "cutlass",
        ]:
            t0 = time.time()
            try:
                m = importlib.import_module(mod)
                ver = getattr(m, "__version__", "")
                print(f"[import] {mod} {ver} from {getattr(m, '__file__', '?')} ({time.time() - t0:.1f}s)")
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                errors.append(f"import {mod}: {type(e).__name__}: {e}")
                print(f"[import] {mod} FAILED: {type(e).__name__}: {e}")
        try:
            import torch

            print(f"[cuda] available={torch.cuda.is_available()} devices={torch.cuda.device_count()} "
                  f"torch.version.cuda={torch.version.cuda}")  # fmt: skip
        except Exception as e:  # noqa: BLE001
            print(f"[cuda] {e}")

    print(f"[summary] {len(errors)} problem(s)")
    return 1 if (errors and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
