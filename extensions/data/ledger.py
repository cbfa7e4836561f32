"""The paged-ledger task: a horizon longer than the context window, answers checked by construction.

    python -m extensions.data.ledger --output-dir data/ledger --split train --count 2000
    python -m extensions.data.ledger --output-dir data/ledger --split test --count 256 --pages 20

Each sample is one ledger of ``--pages`` pages with ``--per-page`` transactions each, spread over
``--accounts`` accounts, read one page per ``read_page(page)`` call (``extensions/tools/ledger.py``).
The question names one account and its opening balance and asks for its balance after every
transaction: the answer is the opening balance plus that account's deposits minus its withdrawals,
computed here, so it is right by construction. Memo text makes the pages long (about 720 tokens
per page of 16 transactions with the Qwen2.5 tokenizer), so the whole history is several context
windows: the default 20 pages are over 14K tokens, more than three 4K windows, and the target
account has about 53 transactions (``tests/data/test_ledger.py`` measures both).

``--question lookup`` asks instead for the amount of the one transaction whose memo carries a given
reference number, drawn uniformly over the ledger (``extra_info.needle_page`` says on which page). Once
found, the answer is copied, not computed, so a small untrained model can earn a reward when the needle
is on a page it reaches; what it cannot do untrained is keep reading past its window. The balance
question gives a 0.5B model no reward at all (docs/results/ledger-folding-cpu, runs 4 and 5).
``--ref-style flag`` asks for the one transaction marked ``| DISPUTED`` instead (``word``: references named by
words); ``--needle-within K`` puts it on the first K pages; ``--answer-tool`` answers with ``submit_answer``.

Deterministic: sample i of split s with seed k is drawn from ``random.Random(f"ledger/{s}/{k}/{i}")``,
so the train and test splits never share a ledger and a rerun writes the same rows.
Columns as ``extensions.data.gsm8k`` writes them; ``data_source`` is ``longflow/ledger`` (scored by
``extensions/custom_rewards.py`` as a ``#### <number>`` answer), ``extra_info.tools_kwargs.read_page.
create_kwargs.pages`` holds the pages and ``extra_info.transactions`` the target account's count.
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extensions.custom_rewards import LABEL_SEP
from extensions.data.gsm8k import write_parquet
from extensions.data.ledger_text import (
    ANSWER_BY_TOOL,
    FLAG,
    SYSTEM,
    SYSTEM_LOOKUP,
    SYSTEM_TO_THE_END,
    page_footer,
    word_ref,
)
from extensions.data.prompts import ANSWER_FORMAT
from extensions.errors import ConfigError, LongflowError
from extensions.rewards.gsm8k import LONGFLOW_LEDGER

logger = logging.getLogger(__name__)

LEDGER = LONGFLOW_LEDGER
TOOL = "read_page"
FOLD_TOOL = "fold"  # extensions/tools/fold.py (not imported: data prep loads no verl)
SUBMIT_TOOL = "submit_answer"  # extensions/tools/submit.py
QUESTIONS = ("balance", "lookup")
FOOTERS = ("read_on", "check", "submit", "end")  # a lookup page's last line: page_footer
KINDS = ("deposit", "withdrawal")
PAYEES = ("Northwind", "Contoso", "Fabrikam", "Tailspin", "Litware", "Adatum", "Proseware", "Wingtip")
REF_STYLES = ("number", "word", "flag")  # the asked transaction: by ref 123456, by ref amber-falcon, or its flag
PURPOSES = ("invoice", "refund", "payroll", "rent", "supplies", "licence", "freight", "consulting", "repairs")


@dataclass(frozen=True)
class LedgerSpec:
    """The shape of every ledger of a split."""

    pages: int = 20
    per_page: int = 16
    accounts: int = 6
    target_transactions: int | None = None  # None: the target account is drawn like any other
    min_pages: int | None = None  # set: each ledger's page count is drawn from [min_pages, pages]
    question: str = "balance"  # or "lookup": the amount of the transaction with a given memo reference
    footer: str = "read_on"  # lookup: what each page's last line says (page_footer)
    answer_tool: bool = False  # answer with a submit_answer call instead of a `#### N` line
    ref_style: str = "number"  # lookup: how a memo names its reference (REF_STYLES)
    needle_within: int | None = None  # lookup: the asked transaction is on one of the first needle_within pages

    def check(self) -> None:
        if self.question not in QUESTIONS:
            raise ConfigError(f"--question must be one of {', '.join(QUESTIONS)}, got {self.question!r}")
        if self.footer not in FOOTERS:
            raise ConfigError(f"--footer must be one of {', '.join(FOOTERS)}, got {self.footer!r}")
        if self.footer != "read_on" and self.question != "lookup":
            raise ConfigError(f"--footer {self.footer} shapes lookup pages; --question {self.question} pages have none")
        if self.ref_style not in REF_STYLES:
            raise ConfigError(f"--ref-style must be one of {', '.join(REF_STYLES)}, got {self.ref_style!r}")
        if self.ref_style != "number" and self.question != "lookup":
            raise ConfigError(
                f"--ref-style {self.ref_style} names lookup references; --question {self.question} asks none"
            )
        if self.needle_within is not None:
            if self.question != "lookup":
                raise ConfigError(f"--needle-within places the asked transaction; --question {self.question} asks none")
            if not 1 <= self.needle_within <= (self.min_pages or self.pages):
                what = "--min-pages" if self.min_pages else "--pages"
                raise ConfigError(
                    f"--needle-within must be between 1 and {what} {self.min_pages or self.pages}, got {self.needle_within}"
                )
        if self.footer in ("submit", "end") and not self.answer_tool:
            raise ConfigError(
                f"--footer {self.footer} tells the model to call submit_answer: add --answer-tool, which offers it"
            )
        if self.question == "lookup" and self.target_transactions is not None:
            raise ConfigError("--target-transactions shapes the balance question; --question lookup takes none")
        for name in ("pages", "per_page", "accounts"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.min_pages is not None and not 1 <= self.min_pages <= self.pages:
            raise ConfigError(f"--min-pages must be between 1 and --pages {self.pages}, got {self.min_pages}")
        fewest = self.pages if self.min_pages is None else self.min_pages
        slots, k = fewest * self.per_page, self.target_transactions
        if k is not None and not 1 <= k <= slots:
            what = "pages" if self.min_pages is None else "min-pages"
            raise ConfigError(f"--target-transactions must be between 1 and {what} x per-page = {slots}, got {k}")
        if k is not None and self.accounts < 2:
            raise ConfigError(f"--target-transactions needs at least 2 accounts, got --accounts {self.accounts}")


@dataclass(frozen=True)
class Ledger:
    pages: list[str]
    account: str
    opening: int
    balance: int
    transactions: int
    needle: tuple[str, int, int] | None = None  # lookup: (memo reference, amount, page)
    flagged: bool = False  # lookup, ref style flag: the needle's line carries FLAG, and the question asks for it

    @property
    def answer(self) -> int:
        return self.balance if self.needle is None else self.needle[1]


def make_ledger(rng: random.Random, spec: LedgerSpec) -> Ledger:
    """One ledger; the target account's balance is summed as the transactions are drawn.

    With ``spec.target_transactions`` = k, the target account holds exactly k transactions at slots drawn
    uniformly over the whole ledger and every other line goes to another account; without it (the
    default, and the draws of earlier ledgers unchanged) every line's account is drawn from all of them.
    With ``spec.min_pages``, the ledger's page count is drawn first, from ``[min_pages, pages]``.
    """
    n_pages = spec.pages if spec.min_pages is None else rng.randint(spec.min_pages, spec.pages)
    accounts = [f"ACC-{rng.randint(100, 999)}{chr(65 + k)}" for k in range(spec.accounts)]
    account, opening = rng.choice(accounts), rng.randint(1, 50) * 100
    targets: set[int] | None = None
    if spec.target_transactions is not None:
        targets = set(rng.sample(range(1, n_pages * spec.per_page + 1), spec.target_transactions))
        others = [a for a in accounts if a != account]
    balance, count, pages, number, refs = opening, 0, [], 0, []
    for page in range(1, n_pages + 1):
        lines = [f"Ledger page {page} of {n_pages}", "ID | Day | Account | Type | Amount | Memo"]
        for _ in range(spec.per_page):
            number += 1
            pool = accounts if targets is None else [account] if number in targets else others
            holder = rng.choice(pool)
            kind, amount = rng.choice(KINDS), rng.randint(1, 400)
            purpose, number_in_memo, payee = rng.choice(PURPOSES), rng.randint(1000, 9999), rng.choice(PAYEES)
            ref = rng.randint(10**5, 10**6 - 1)  # drawn in the order of earlier versions: the same ledgers
            ref = word_ref(ref) if spec.ref_style == "word" else ref  # flag: kept, the flag is added below
            memo = f"{purpose} {number_in_memo} {payee} ref {ref}"
            refs.append((str(ref), amount, page))
            lines.append(f"T{number:05d} | day {rng.randint(1, 365)} | {holder} | {kind} | {amount} | {memo}")
            if holder == account:
                balance += amount if kind == "deposit" else -amount
                count += 1
        pages.append("\n".join(lines))
    needle = None
    if spec.question == "lookup":  # drawn last: the ledgers themselves are those of the balance question
        seen = Counter(r for r, _, _ in refs)
        unique = [line for line in refs if seen[line[0]] == 1 and line[2] <= (spec.needle_within or n_pages)]
        if not unique:
            where = f"on its first {spec.needle_within} pages " if spec.needle_within else ""
            raise LongflowError(f"no transaction {where}of this {n_pages}-page ledger has a memo reference of its own")
        needle = rng.choice(unique)
        target = f"ref {needle[0]}"
        if spec.ref_style == "flag":
            k, line = needle[2] - 1, f" ref {needle[0]}"
            pages[k] = "\n".join(f"{x} | {FLAG}" if x.endswith(line) else x for x in pages[k].split("\n"))
            target = f"the {FLAG} transaction"
        pages = [page + "\n" + page_footer(k, n_pages, spec.footer, target) for k, page in enumerate(pages, 1)]
    return Ledger(pages, account, opening, balance, count, needle, needle is not None and spec.ref_style == "flag")


def question_text(ledger: Ledger, *, answer_tool: bool = False, footer: str = "read_on") -> tuple[str, str]:
    """The system prompt and the question of a ledger's sample; ``answer_tool``: the prompt says to answer with a
    ``submit_answer`` call instead of a ``####`` line; footer ``end``: after reading every page."""
    system, question = _question_text(ledger)
    if footer == "end":
        return SYSTEM_TO_THE_END, question
    return (system.replace(ANSWER_FORMAT, ANSWER_BY_TOOL) if answer_tool else system), question


def _question_text(ledger: Ledger) -> tuple[str, str]:
    if ledger.flagged:
        return SYSTEM_LOOKUP, (
            f"The ledger has {len(ledger.pages)} pages. Exactly one transaction in it is marked {FLAG} at the end "
            f"of its line. What is the amount of that transaction (its Amount column)?"
        )
    if ledger.needle is not None:
        return SYSTEM_LOOKUP, (
            f"The ledger has {len(ledger.pages)} pages. Exactly one transaction in it has the memo reference "
            f"ref {ledger.needle[0]}. What is the amount of that transaction (its Amount column)?"
        )
    return SYSTEM, (
        f"The ledger has {len(ledger.pages)} pages. Account {ledger.account} opened with a balance of {ledger.opening}. "
        f"Deposits add to an account's balance and withdrawals subtract from it. What is the balance of account "
        f"{ledger.account} after every transaction in the ledger?"
    )


def build_row(
    ledger: Ledger,
    spec: LedgerSpec,
    *,
    index: int,
    split: str,
    agent_name: str,
    fold_tool: bool = False,
    label: str | None = None,
) -> dict[str, Any]:
    """One verl sample; ``fold_tool`` also offers ``fold`` (``extensions/tools/fold.py``); ``label`` makes the
    data_source ``longflow/ledger@<label>`` (its own validation metrics: ``extensions/custom_rewards.py``)."""
    system, question = question_text(ledger, answer_tool=spec.answer_tool, footer=spec.footer)
    extra_info = {
        "split": split,
        "index": index,
        "question": question,
        "transactions": ledger.transactions,
        "tools_kwargs": {TOOL: {"create_kwargs": {"pages": ledger.pages}}},
        "tool_selection": [TOOL, *([FOLD_TOOL] if fold_tool else []), *([SUBMIT_TOOL] if spec.answer_tool else [])],
        "question_form": spec.question,
    }
    if ledger.needle is not None:
        extra_info["needle_page"] = ledger.needle[2]
    return {
        "data_source": LEDGER if label is None else f"{LEDGER}{LABEL_SEP}{label}",
        "agent_name": agent_name,
        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "ability": "bookkeeping",
        "reward_model": {"style": "rule", "ground_truth": str(ledger.answer)},
        "extra_info": extra_info,
    }


def prepare(
    output_dir: str | Path,
    *,
    split: str,
    count: int,
    spec: LedgerSpec,
    seed: int = 0,
    agent_name: str,
    fold_tool: bool = False,
    label: str | None = None,
) -> Path:
    """Write ``<output_dir>/<split>.parquet`` with ``count`` ledgers; returns its path."""
    spec.check()
    if count < 1:
        raise ConfigError(f"--count must be at least 1, got {count}")
    if label is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
        raise ConfigError(f"--label {label!r}: expected letters, digits, '_', '.' or '-' (it goes after {LABEL_SEP!r})")
    rows = [
        build_row(
            make_ledger(random.Random(f"ledger/{split}/{seed}/{i}"), spec),
            spec,
            index=i,
            split=split,
            agent_name=agent_name,
            fold_tool=fold_tool,
            label=label,
        )
        for i in range(count)
    ]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = write_parquet(rows, out / f"{split}.parquet")
    size = f"{spec.pages}" if spec.min_pages is None else f"{spec.min_pages} to {spec.pages}"
    logger.info("wrote %d ledgers of %s pages to %s", count, size, path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: 0 on success, 2 on a reported option error."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m extensions.data.ledger", description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--split", default="train", help="split name: output file, extra_info.split, seed stream")
    parser.add_argument("--count", type=int, default=1000, help="ledgers to write")
    parser.add_argument("--pages", type=int, default=LedgerSpec.pages)
    parser.add_argument("--per-page", type=int, default=LedgerSpec.per_page)
    parser.add_argument("--accounts", type=int, default=LedgerSpec.accounts)
    parser.add_argument(
        "--min-pages",
        type=int,
        default=None,
        help="draw each ledger's page count from [--min-pages, --pages] (a curriculum; default: all --pages)",
    )
    parser.add_argument(
        "--target-transactions",
        type=int,
        default=None,
        help="exactly this many transactions of the asked account, anywhere in the ledger (default: drawn)",
    )
    parser.add_argument(
        "--question",
        choices=QUESTIONS,
        default="balance",
        help="balance: the asked account's closing balance; lookup: the amount of the transaction with a given "
        "memo reference, on a page drawn uniformly",
    )
    parser.add_argument(
        "--footer",
        choices=FOOTERS,
        default="read_on",
        help="lookup: each page's last line; read_on names the next call, check also asks whether the page holds "
        "the reference and says to answer now if it does, submit says to answer with submit_answer (--answer-tool), "
        "end says to read on to the last page and answer there with submit_answer (--answer-tool)",
    )
    parser.add_argument(
        "--answer-tool",
        action="store_true",
        help="offer submit_answer (tool_configs/ledger.yaml) and say to answer with it instead of a '#### N' line",
    )
    parser.add_argument(
        "--ref-style",
        choices=REF_STYLES,
        default="number",
        help="lookup: ask for the transaction with a 6-digit reference (ref 123456), a word-pair one (ref "
        "amber-falcon), or the one flagged DISPUTED at the end of its line (flag)",
    )
    parser.add_argument(
        "--needle-within",
        type=int,
        default=None,
        help="lookup: put the asked transaction on one of the first K pages (training ledgers where only stopping at "
        "it pays: answering at a fixed page is right at most 1 time in K)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agent-name", default="folding_workflow", help="agent loop name for the agent_name column")
    parser.add_argument("--fold-tool", action="store_true", help="also offer the fold tool (folding_workflow only)")
    parser.add_argument(
        "--label",
        help="data_source longflow/ledger@LABEL: scored the same, reported apart in verl's validation (a baseline's "
        "rows beside the trained loop's in one validation set)",
    )
    args = parser.parse_args(argv)
    try:
        spec = LedgerSpec(
            pages=args.pages,
            per_page=args.per_page,
            accounts=args.accounts,
            target_transactions=args.target_transactions,
            min_pages=args.min_pages,
            question=args.question,
            footer=args.footer,
            answer_tool=args.answer_tool,
            ref_style=args.ref_style,
            needle_within=args.needle_within,
        )
        prepare(
            args.output_dir,
            split=args.split,
            count=args.count,
            spec=spec,
            seed=args.seed,
            agent_name=args.agent_name,
            fold_tool=args.fold_tool,
            label=args.label,
        )
    except LongflowError as exc:
        logger.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
