"""Run every command in the shell blocks (```bash or ```sh) of README.md and the docs site's pages, in order, as
written, on a checkout after the main job.

    .venv/bin/python scripts/readme_commands.py --short    # .ci/run calls it after the main job
    .venv/bin/python scripts/readme_commands.py --dry-run  # list what would run and what is skipped, and why

The pages are README.md, then the docs site's pages in the order of mkdocs.yml's nav (``site_pages``), leaving
out the results and benchmark pages: those record runs on GPU machines and minutes-long measurements, with the
command that made each. A command that an earlier page already has runs once.

Each command runs through ``bash -c`` from the repo root, with ``.venv/bin`` first on PATH (so ``python``
is the venv's). Skipped, with the reason printed: the main job and the tests (``.ci/run`` runs them just
before) and the commands that train on a GPU. ``$README_ROLLOUT_ARGS`` (default empty) is appended to
the rollout driver's commands, so CI can shorten them (``--limit 1`` wins over the README's
``--limit 4``: argparse keeps the last); the replay gets them too, since it must run with the
recording run's settings (a shorter response_length ends trajectories earlier). ``--short`` appends each
benchmark's ``SHORT_FORMS`` arguments (smaller workloads, the repo's sample problems instead of the
dataset hub), so CI checks that the benchmarks run, not how fast. A command fails the run when it exits non-zero or prints one
of ``FORBIDDEN`` (a false warning, verl's tool-schema dump, a traceback). Exit status: 0 if every
command passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = (
    (re.compile(r"^bash scripts/(main_job|test)\.sh\b"), ".ci/run runs it before this script"),
    (re.compile(r"^(\w+=\S+ )*bash experiments/[\w-]+/run\.sh\b"), "trains with stock verl and vLLM: needs a GPU"),
    (re.compile(r"^pip install -e /path/to/"), "the verl-command example: installs the pack into a GPU machine"),
    (re.compile(r"^python -m verl\.trainer\.main_ppo\b"), "trains with stock verl on vLLM or SGLang: needs a GPU"),
    (re.compile(r"^pip install uv\b"), "installs SGLang's GPU stack into its own environment"),
    (re.compile(r"--backend (sglang|vllm)\b"), "rolls out on verl's GPU engine: needs a GPU and that engine"),
    (
        re.compile(r"^(\w+=\S+ )*bash scripts/gpu/"),
        "the offline GPU install: downloads ~2 GiB, or runs on the GPU machine",
    ),
    (
        re.compile(r"^echo /\.whl-gpu/ >> \.git/info/exclude"),
        "the offline GPU install: edits this checkout's git settings",
    ),
    (re.compile(r"^source /tmp/longflow-env\.sh\b"), "on the GPU machine, after the offline install"),
)
NOT_RUN_PAGES = ("results/", "benchmarks/")
"""Docs pages (relative to docs/) whose commands are not run: records of GPU runs and minutes-long benchmarks."""
SHORT_FORMS = {
    "benchmarks.loop_overhead": "--traces 8 --synthetic 4 --repeats 1 --turn-passes 1 "
    "--gsm8k experiments/gsm8k_code_verify/sample_problems.jsonl",
    "benchmarks.tool_concurrency": "--trajectories 16 --rounds 2 --parallel-trajectories 4 --repeats 1",
    "benchmarks.load": "--trajectories 50 --batches 1",
}
"""With ``--short``: arguments appended to each benchmark's README command (argparse keeps the last)."""
FORBIDDEN = ("incorrect regex pattern", '"type": "function"', "Traceback (most recent call last)")
ROLLOUT_RUN = re.compile(r"^python -m extensions\.rollout ")


def readme_commands(text: str) -> list[str]:
    """The commands of the ```bash and ```sh blocks, in order: continuation lines joined, comment-only lines left out."""
    commands: list[str] = []
    for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        pending = ""
        for line in block.splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].rstrip() + " "
                continue
            commands.append(" ".join((pending + line.strip()).split()) if pending else line.strip())
            pending = ""
    return commands


def site_pages(root: Path = ROOT) -> list[Path]:
    """The docs site's pages in mkdocs.yml's nav order, minus ``NOT_RUN_PAGES``."""
    import yaml

    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        if isinstance(node, list):
            return [page for item in node for page in walk(item)]
        return []

    config = yaml.safe_load((root / "mkdocs.yml").read_text())
    docs = root / config.get("docs_dir", "docs")
    pages = [page for page in walk(config.get("nav", [])) if page.endswith(".md")]
    return [docs / page for page in dict.fromkeys(pages) if not page.startswith(NOT_RUN_PAGES)]


def page_commands(pages: list[Path]) -> list[tuple[str, Path, Path | None]]:
    """(command, page, first page that had it or None) of every page's shell blocks, in order; a command is the
    same as an earlier one when they differ only in a trailing comment."""
    seen: dict[str, Path] = {}
    found = []
    for page in pages:
        for command in readme_commands(page.read_text()):
            key = re.sub(r"\s+#(\s.*)?$", "", command)
            found.append((command, page, seen.get(key)))
            seen.setdefault(key, page)
    return found


def skip_reason(command: str) -> str | None:
    return next((reason for pattern, reason in SKIP if pattern.search(command)), None)


def short_form(command: str) -> str:
    """``command`` with its benchmark's ``SHORT_FORMS`` arguments appended (other commands unchanged)."""
    match = re.match(r"^python -m (benchmarks\.\w+)\b", command)
    if not match or match.group(1) not in SHORT_FORMS:
        return command
    return append_args(command, SHORT_FORMS[match.group(1)])


def with_extra_args(command: str, extra: str) -> str:
    if not extra or not ROLLOUT_RUN.search(command):
        return command
    return append_args(command, extra)


def append_args(command: str, args: str) -> str:
    if "#" in command:
        raise ValueError(f"cannot append arguments to a command with a comment: {command}")
    return f"{command} {args}"


def run(command: str) -> tuple[bool, str]:
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    output = done.stdout + done.stderr
    problems = [f"exit {done.returncode}"] if done.returncode else []
    problems += [f"printed {f!r}" for f in FORBIDDEN if f in output]
    return not problems, output + (f"\nFAILED: {', '.join(problems)}\n" if problems else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/readme_commands.py", description=__doc__.split("\n")[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--no-docs", action="store_true", help="README.md only, not the docs site's pages")
    parser.add_argument("--dry-run", action="store_true", help="list the commands and skips; run nothing")
    parser.add_argument("--short", action="store_true", help="run the benchmarks' short forms (SHORT_FORMS)")
    args = parser.parse_args(argv)
    extra = os.environ.get("README_ROLLOUT_ARGS", "").strip()
    failed = []
    pages = [args.readme] + ([] if args.no_docs else site_pages())
    for command, page, earlier in page_commands(pages):
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        reason = skip_reason(command)
        if earlier is not None:
            print(
                f"same  {command}\n      ({where}: ran or skipped above, from {earlier.relative_to(ROOT)})", flush=True
            )
            continue
        if reason:
            print(f"skip  {command}\n      ({where}: {reason})", flush=True)
            continue
        command = with_extra_args(short_form(command) if args.short else command, extra)
        print(f"run   {command}\n      ({where})", flush=True)
        if args.dry_run:
            continue
        started = time.monotonic()
        ok, output = run(command)
        print(output.rstrip() + f"\n      ({'ok' if ok else 'FAILED'}, {time.monotonic() - started:.0f} s)", flush=True)
        if not ok:
            failed.append(command)
    print(f"README and docs commands: {len(failed)} failed" + "".join(f"\n  {c}" for c in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
