"""Can the model answer a lookup ledger once the page that holds the transaction is in front of it?

    python scripts/ledger_needle_probe.py --per-page 4 16 --count 16          # embedded CPU model, greedy
    python scripts/ledger_needle_probe.py --model /path/to/hf/model --per-page 4

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

FORMAT = "Answer with the number alone on a last line of the form #### <number>."


def probe(model_dir: str, per_page: int, count: int, *, quiet: bool = False) -> tuple[int, int]:
    """(answers whose last number is the amount, of those the ones written as ``#### N``) over ``count`` pages."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from extensions.data.ledger import LedgerSpec, make_ledger, question_text

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
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
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=48, do_sample=False)
        reply = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        numbers = re.findall(r"-?\d+", reply)
        ok = bool(numbers) and int(numbers[-1]) == amount
        right += ok
        strict += ok and re.search(rf"####\s*{amount}\b", reply) is not None
        if not quiet:
            print(f"  {i:3d} {'right' if ok else 'wrong'}: amount {amount}, reply {reply.strip()[-60:]!r}", flush=True)
    return right, strict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="an HF model folder (default: the embedded CPU model)")
    parser.add_argument("--per-page", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.model is None:
        from extensions.backends.embedded_model import ensure_embedded_model

        args.model = str(ensure_embedded_model())
    for per_page in args.per_page:
        started = time.perf_counter()
        right, strict = probe(args.model, per_page, args.count, quiet=args.quiet)
        print(
            f"per_page {per_page}: {right}/{args.count} right ({strict} as '#### N'), "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
