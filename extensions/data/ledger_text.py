"""The words of the paged-ledger task (``extensions.data.ledger``): system prompts, page footers, memo references."""

from __future__ import annotations

from extensions.data.prompts import ANSWER_FORMAT

FLAG = "DISPUTED"  # ref style flag: the asked transaction's line ends with " | DISPUTED"
COLOURS = ("amber", "azure", "coral", "crimson", "golden", "indigo", "ivory", "jade", "lemon", "lilac", "olive", "plum")
ANIMALS = (
    "badger",
    "falcon",
    "heron",
    "lynx",
    "marten",
    "otter",
    "panda",
    "raven",
    "salmon",
    "tiger",
    "walrus",
    "zebra",
)


def word_ref(number: int) -> str:
    """A memo reference in words, from the drawn number: the untrained 0.5B model, asked for the amount of ref 123456
    among lines full of digits, submitted 123456 itself 8 times in 11 (docs/results/ledger-flagged-h200). Word ledgers
    have the number ledgers' lines with the references renamed, but 144 names collide often, so the asked
    transaction (drawn among the references unique after renaming) is usually another one, and a long ledger may
    have no unique reference at all (an error names the ledger)."""
    return f"{COLOURS[number % len(COLOURS)]}-{ANIMALS[number // len(COLOURS) % len(ANIMALS)]}"


SYSTEM = (
    "You are a careful bookkeeper. The ledger is too long to read at once: call read_page with a page "
    "number to read one page at a time, in order, and keep track of the balance as you go. To read page 1, "
    'reply with exactly <tool_call>{"name": "read_page", "arguments": {"page": 1}}</tool_call> and nothing else. '
    + ANSWER_FORMAT
)


def page_footer(page: int, pages: int, style: str = "read_on", target: str = "") -> str:
    """The last line of a lookup ledger's page. ``read_on``: where the reader is and which call reads on (the
    untrained 0.5B model read page 1 over and over without it: docs/results/ledger-folding-cpu, run 6).
    ``check``: also asks whether the page holds the reference, and says to answer now if it does (with
    ``read_on`` the model read on past the transaction's page: runs 8 and 9). ``submit``: the same, answering
    with a ``submit_answer`` call (``--answer-tool``). ``end``: read on to the last page, which says to answer
    with ``submit_answer`` (the untrained model reads on and does not stop at the transaction's page: it answers
    where the page tells it to). None says where it is."""
    where = f"End of page {page} of {pages}"
    if style == "end":
        if page == pages:
            return (
                f"{where}: this is the last page. Now call submit_answer with the amount of "
                f"{target if target.startswith('the ') else 'the transaction with ' + target}."
            )
        return f"{where}. Call read_page with page {page + 1}."
    if style == "submit":
        if page == pages:
            return f"{where}: this is the last page. If {target} is on it, call submit_answer with its amount."
        return (
            f"{where}. If {target} is on this page, call submit_answer with its amount; if not, call read_page "
            f"with page {page + 1}."
        )
    if style == "check":
        if page == pages:
            return f"{where}: this is the last page. If {target} is on it, answer with its amount."
        return (
            f"{where}. Is {target} on this page? If so, answer with its amount now; if not, call read_page with "
            f"page {page + 1}."
        )
    if page == pages:
        return f"{where}: this is the last page."
    return f"{where}. To read on, call read_page with page {page + 1}."


SYSTEM_LOOKUP = (
    "You are a careful bookkeeper. The ledger is too long to read at once: call read_page with a page "
    "number to read one page at a time, in order, until you find the transaction you are asked about. To read "
    'page 1, reply with exactly <tool_call>{"name": "read_page", "arguments": {"page": 1}}</tool_call> and nothing '
    "else. " + ANSWER_FORMAT
)


ANSWER_BY_TOOL = "When you have found the answer, call submit_answer with it (the number only); that ends the task."
SYSTEM_TO_THE_END = (  # footer "end": every page is read, the answer comes after the last one
    "You are a careful bookkeeper. The ledger is too long to read at once: call read_page with a page number to "
    "read one page at a time, in order, up to the last page, and remember the transaction you are asked about when "
    'you see it. To read page 1, reply with exactly <tool_call>{"name": "read_page", "arguments": {"page": 1}}'
    "</tool_call> and nothing else. After the last page, call submit_answer with the answer (the number only); "
    "that ends the task."
)
