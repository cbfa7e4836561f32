"""A scripted demonstrator of the flagged paged ledger (``--question lookup --ref-style flag --answer-tool``).

It reads the context the loop built (the decoded prompt, special tokens kept) and writes what a careful reader
would: ``read_page`` for the page after the last one read, ``submit_answer`` with the amount once the page in
front of it holds the line marked ``| DISPUTED``, and, asked to fold, a summary that names the last page read
(and the amount, if found). It never sees the answer key: only pages the loop has put in its context, so its
demonstrations are what the task's tools reveal. Used through ``extensions/backends/demo_server.py``.
"""

from __future__ import annotations

import json
import re

from extensions.data.ledger_text import FLAG

ASSISTANT_OPEN = "<|im_start|>assistant\n"
SUMMARY_OPEN = "<summary>"
_PAGE = re.compile(r"Ledger page (\d+) of (\d+)\n(.*?)End of page \1 of \2", re.DOTALL)
_READ_SO_FAR = re.compile(r"Pages read so far: 1 to (\d+)")


def tool_call(name: str, **arguments: object) -> str:
    """A call in Qwen2.5's own format, as its chat template writes one."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def flagged_amount(page_body: str) -> int | None:
    """The Amount column of the page's ``| DISPUTED`` line, or None."""
    for line in page_body.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if cells[-1] == FLAG and len(cells) >= 6:
            return int(cells[4])
    return None


def reading(context: str) -> tuple[int, int | None, int | None]:
    """(last page read, the ledger's page count, the flagged amount on that page) as the context shows them:
    the last page in it, or, with none, the page a summary says was read last (0: nothing read)."""
    pages = list(_PAGE.finditer(context))
    if pages:
        last = pages[-1]
        return int(last.group(1)), int(last.group(2)), flagged_amount(last.group(3))
    said = _READ_SO_FAR.findall(context)
    return (int(said[-1]) if said else 0), None, None


def summary(page: int, pages: int | None, amount: int | None) -> str:
    """What the demonstrator writes inside ``<summary>``, closed."""
    if amount is not None:
        after = f"Found the DISPUTED transaction on page {page}: its amount is {amount}."
    elif pages is not None and page >= pages:
        after = f"Page {page} was the last page."
    else:
        after = f"Next page to read: {page + 1}."
    return f"Pages read so far: 1 to {page}.\n{after}\n</summary>"


def flagged_ledger(context: str) -> str:
    """The demonstrator's reply to ``context`` (the prompt up to and including the assistant turn's opening)."""
    opening = context.rsplit(ASSISTANT_OPEN, 1)[-1] if ASSISTANT_OPEN in context else ""
    page, pages, amount = reading(context[: len(context) - len(opening)])
    if opening.startswith(SUMMARY_OPEN):  # the loop opened the reply to a fold request
        written = opening[len(SUMMARY_OPEN) :].lstrip("\n")
        text = summary(page, pages, amount)
        return text[len(written) :] if text.startswith(written) else text
    if amount is not None:
        return tool_call("submit_answer", answer=amount)
    return tool_call("read_page", page=page + 1)
