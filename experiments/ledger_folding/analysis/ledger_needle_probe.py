"""Can the model answer a lookup ledger once the page that holds the transaction is in front of it?

    python experiments/ledger_folding/analysis/ledger_needle_probe.py --per-page 4 16 --count 16  # embedded CPU model, greedy
    python experiments/ledger_folding/analysis/ledger_needle_probe.py --model /path/to/hf/model --per-page 4
    python experiments/ledger_folding/analysis/ledger_needle_probe.py --in-loop --footer read_on check --count 24  # in the ReAct loop

``--in-loop`` asks the question the loop leaves to the model: it has read pages 1 to the needle's page through
``read_page`` calls (the lookup preset's 60 pages of ``--per-page`` lines, ledgers whose needle is on pages 1 to 4,
chat template with the tool declared, as the ReAct loop renders it), and the last tool result holds the
transaction. Does it answer now (right or wrong), or call ``read_page`` again? Per ``--footer`` style; with
``--answer-tool`` the sample offers ``submit_answer`` and its prompt says to answer with it (``--footer submit``),
and a call to it counts as the answer (``strict``: answered by a call).

The step of ``--question lookup`` that no horizon can help with: one page (``--per-page`` lines, as
``extensions.data.ledger`` writes them, footer included) and the question, one turn, greedy. Prints, per page
size, how many answers name the transaction's amount (the last number of the reply, as the reward's flexible
mode reads it; with ``####`` as strict mode needs it). It picks the page size for the task before any GPU
time is spent: below it, the untrained policy earns no outcome reward however far it reads.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable

from extensions.data.ledger import FOOTERS, REF_STYLES

FORMAT = "Answer with the number alone on a last line of the form #### <number>."
Greedy = Callable[..., str]  # greedy(messages, max_new_tokens, tools=None, opening="") -> the reply's text


def load_greedy(model_dir: str) -> Greedy:
    """The model, loaded once for every probe of a run: a function from chat messages to its greedy reply
    (``opening``: text the reply starts with, written for the model, as a loop's ``summary_prefix`` is)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)

    def greedy(messages: list[dict], max_new_tokens: int, tools: list[dict] | None = None, opening: str = "") -> str:
        text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False) + opening
        ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False
            )
        return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)

    return greedy


def tool_schemas(answer_tool: bool) -> list[dict]:
    """The tools a ledger sample declares to the chat template: ``read_page``, and ``submit_answer`` if offered."""
    from extensions.tools.ledger import ReadPageTool
    from extensions.tools.submit import SubmitAnswerTool

    classes = [ReadPageTool, SubmitAnswerTool] if answer_tool else [ReadPageTool]
    return [c({"type": "native"}).tool_schema.model_dump(exclude_unset=True, exclude_none=True) for c in classes]


def react_messages(ledger, last_page: int, *, answer_tool: bool, footer: str) -> list[dict]:
    """The ReAct conversation as the loop renders it: the task, then ``read_page`` 1 to ``last_page`` and each page."""
    from extensions.data.ledger import question_text

    system, question = question_text(ledger, answer_tool=answer_tool, footer=footer)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    for k in range(1, last_page + 1):
        call = {"name": "read_page", "arguments": {"page": k}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]})
        messages.append({"role": "tool", "content": ledger.pages[k - 1]})
    return messages


def probe(greedy: Greedy, per_page: int, count: int, *, quiet: bool = False) -> tuple[int, int]:
    """(answers whose last number is the amount, of those the ones written as ``#### N``) over ``count`` pages."""
    from extensions.data.ledger import LedgerSpec, make_ledger, question_text

    right = strict = 0
    for i in range(count):
        spec = LedgerSpec(pages=3, per_page=per_page, accounts=6, question="lookup")
        ledger = make_ledger(random.Random(f"needle-probe/{per_page}/{i}"), spec)
        ref, amount, page = ledger.needle
        question = question_text(ledger)[1].split(". ", 1)[1]  # without "The ledger has N pages."
        messages = [
            {"role": "system", "content": FORMAT},
            {"role": "user", "content": ledger.pages[page - 1] + "\n\n" + question},
        ]
        reply = greedy(messages, 48)
        numbers = re.findall(r"-?\d+", reply)
        ok = bool(numbers) and int(numbers[-1]) == amount
        right += ok
        strict += ok and re.search(rf"####\s*{amount}\b", reply) is not None
        if not quiet:
            print(f"  {i:3d} {'right' if ok else 'wrong'}: amount {amount}, reply {reply.strip()[-60:]!r}", flush=True)
    return right, strict


def in_loop_probe(
    greedy: Greedy,
    per_page: int,
    count: int,
    footer: str,
    *,
    pages: int = 60,
    answer_tool: bool = False,
    ref_style: str = "number",
    quiet: bool = False,
) -> dict[str, int]:
    """Counts of what the model does once the needle's page is the last tool result: ``right`` (its last number is
    the amount, no call), ``strict`` (of those, as ``#### N``), ``wrong`` (answers, not the amount), ``read_on``
    (calls a tool again)."""
    import json

    from extensions.data.ledger import LedgerSpec, make_ledger

    tools = tool_schemas(answer_tool)
    spec = LedgerSpec(
        pages=pages,
        per_page=per_page,
        accounts=6,
        question="lookup",
        footer=footer,
        answer_tool=answer_tool,
        ref_style=ref_style,
    )
    spec.check()  # e.g. --footer end or submit without --answer-tool: a prompt naming a tool not offered
    counts = {"right": 0, "strict": 0, "wrong": 0, "read_on": 0}
    seed = 0
    for i in range(count):
        while True:  # the same ledgers for every footer but end (which takes every seed: its needle may be anywhere)
            ledger = make_ledger(random.Random(f"needle-loop/{per_page}/{seed}"), spec)
            seed += 1
            if ledger.needle[2] <= 4 or footer == "end":
                break
        ref, amount, page = ledger.needle
        last = pages if footer == "end" else page  # end: every page, the answer comes after the last
        messages = react_messages(ledger, last, answer_tool=answer_tool, footer=footer)
        reply = greedy(messages, 64, tools)
        numbers = re.findall(r"-?\d+", reply)
        submitted = re.search(r'"submit_answer",\s*"arguments":\s*\{"answer":\s*"?(-?\d+)', reply)
        if submitted:  # the loop ends on the first valid call: its number is the answer
            what = "right" if int(submitted[1]) == amount else "wrong"
            counts["strict"] += what == "right"
        elif "<tool_call>" in reply or "read_page" in reply:
            what = "read_on"
        elif numbers and int(numbers[-1]) == amount:
            what = "right"
            counts["strict"] += re.search(rf"####\s*{amount}\b", reply) is not None
        else:
            what = "wrong"
        counts[what] += 1
        if not quiet:
            print(f"  {i:3d} {what}: page {page}, amount {amount}, reply {json.dumps(reply.strip()[-70:])}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="an HF model folder (default: the embedded CPU model)")
    parser.add_argument("--per-page", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--in-loop", action="store_true", help="the needle's page as the last read_page result")
    parser.add_argument(
        "--footer", nargs="+", choices=FOOTERS, default=["read_on"], help="--in-loop: page footer styles to compare"
    )
    parser.add_argument("--answer-tool", action="store_true", help="--in-loop: offer submit_answer (--footer submit)")
    parser.add_argument("--ref-style", choices=REF_STYLES, default="number", help="--in-loop: memo references")
    parser.add_argument(
        "--pages",
        type=int,
        nargs="+",
        default=[60],
        help="--in-loop: ledger lengths (1: the needle's page is the last)",
    )
    args = parser.parse_args(argv)
    if args.model is None:
        from extensions.backends.embedded_model import ensure_embedded_model

        args.model = str(ensure_embedded_model())
    greedy = load_greedy(args.model)
    if args.in_loop:
        for per_page in args.per_page:
            for footer in args.footer:
                for pages in args.pages:
                    started = time.perf_counter()
                    counts = in_loop_probe(
                        greedy,
                        per_page,
                        args.count,
                        footer,
                        pages=pages,
                        answer_tool=args.answer_tool,
                        ref_style=args.ref_style,
                        quiet=args.quiet,
                    )
                    print(
                        f"in loop, {pages} pages of {per_page} lines, footer {footer}: {counts} of {args.count}, "
                        f"{time.perf_counter() - started:.0f} s",
                        flush=True,
                    )
        return 0
    for per_page in args.per_page:
        started = time.perf_counter()
        right, strict = probe(greedy, per_page, args.count, quiet=args.quiet)
        print(
            f"per_page {per_page}: {right}/{args.count} right ({strict} as '#### N'), "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
