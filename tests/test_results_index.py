"""What a user reads about results: docs/results/README.md indexes every result, each result's README opens
with its claim and the command that reproduces it, and the user-facing text (README.md, docs/**/*.md,
experiments/** and scripts/gpu/README.md, the offline-install reference) neither tells how GPU machines were
obtained nor names internal issue numbers.

Raw records are left as they were written (logs, CSV, JSON/JSONL dumps, .txt captures): they are not read here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
RAW = {".log", ".jsonl", ".csv", ".txt", ".json", ".gz", ".xz", ".tgz", ".png", ".parquet", ".pyc"}

# How machines were obtained is not something a user reproduces: holds, leases, carry calls, parking
# docs/results, a machine that went back, device time. Each pattern names the borrowing sense only
# ("each folder holds", "held-out", "response budget" and `carry_last_observation` stay allowed).
BORROWING = re.compile(
    r"|".join(
        (
            r"\b(?:the|a|one|two|this|next|each|first|second|third|another|same|later|earlier|its|whole|per|"
            r"own|SGLang|lost) holds?\b",
            r"\bholds? (?:[AB]|ended|went|was lost|lost|ran|counted)\b",
            r"\b(?:minutes|min|\d) held\b(?![- ]out)",
            r"\bheld time\b",
            r"\blease[sd]?\b",
            r"\blent\b",
            r"\bborrow(?:ed|ing)?\b",
            r"\bcarr(?:y|ies|ied) (?:calls?|plan|batch(?:es)?|began)\b",
            r"\bcarry_plan\b",
            r"\bpark(?:ed|ing)?\b|\bpark_results\b",
            r"\b(?:machine|it|hold) (?:went|goes|was given|had gone) back\b",
            r"\bdevice (?:time|budget|calls?)\b",
            r"\bidle (?:limit|time|between)\b|\b(?:while|s) idle\b",
            r"\bnvidia-h[12]00(?:-x\d)?\b",
            r"\bfiles_at\b|\bOUT=\$OUT\b",
        )
    ),
    re.IGNORECASE,
)
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
# Names kept where scripts use them (renaming one is a scripts/ change): a result folder and two tool files.
KNOWN_NAMES = ("ledger-h100-lost-hold", "carry_plan.py", "park_results.sh")


def user_facing_texts() -> list[Path]:
    paths = [
        ROOT / "README.md",
        ROOT / "scripts" / "gpu" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "experiments").rglob("*")),
    ]
    return [p for p in paths if p.is_file() and p.suffix not in RAW and "__pycache__" not in p.parts]


def hits(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in user_facing_texts():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in KNOWN_NAMES:
                line = line.replace(name, "")
            found += [f"{path.relative_to(ROOT)}:{number}: {m.group(0)!r}" for m in pattern.finditer(line)]
    return found


def test_no_story_of_how_machines_were_obtained() -> None:
    found = hits(BORROWING)
    assert not found, "say what a user runs on their own GPU machine, not how ours was obtained:\n" + "\n".join(found)


def test_no_internal_issue_numbers() -> None:
    found = hits(ISSUE_NUMBER)
    assert not found, "name the goal, not the internal issue:\n" + "\n".join(found)


def index_text() -> str:
    return (RESULTS / "README.md").read_text(encoding="utf-8")


def test_the_index_names_every_result() -> None:
    entries = sorted(p.name for p in RESULTS.iterdir() if p.name != "README.md")
    missing = [name for name in entries if f"]({name}" not in index_text()]
    assert not missing, (
        f"docs/results/README.md: add a row linking each of {missing} (date, hardware, claim, command, status)"
    )


def test_every_index_link_exists() -> None:
    linked = re.findall(r"\]\(([^)#]+)\)", index_text())
    local = [
        link for link in linked if not link.startswith(("http", "../"))
    ]  # other docs pages: mkdocs --strict checks
    missing = [link for link in local if not (RESULTS / link).exists()]
    assert not missing, f"docs/results/README.md links what is not there: {missing}"


RESULT_PAGES = sorted([*RESULTS.glob("*/README.md"), *(p for p in RESULTS.glob("*.md") if p.name != "README.md")])


@pytest.mark.parametrize("readme", RESULT_PAGES, ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_each_result_opens_with_its_claim_and_command(readme: Path) -> None:
    head = "\n".join(readme.read_text(encoding="utf-8").splitlines()[:25])
    assert re.search(r"^\*\*Claim", head, re.MULTILINE), (
        f"{readme}: open with **Claim:** (one line) in the first 25 lines"
    )
    assert re.search(r"^\*\*Reproduce", head, re.MULTILINE), f"{readme}: give **Reproduce** (the command) near the top"
