"""Throughput and greedy parity of ``HFServer`` against plain ``model.generate`` on the same prompts.

    python -m extensions.backends.compare_generate --n 4 --max-tokens 64            # the embedded model
    python -m extensions.backends.compare_generate --n 1 --model-dir /path/to/hf_dir --threads 2 --dtype bfloat16

Three runs, greedy, same ``max_tokens``, same chat prompts: ``model.generate`` one prompt at a time (the
reference tokens), ``model.generate`` on all ``n`` prompts as one left-padded batch, and ``n`` concurrent
``HFServer.generate`` requests. A sequence ends at EOS (kept) or ``max_tokens``; tokens/s counts generated
tokens only. ``identical`` compares each run's tokens with the reference, token for token.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from extensions.backends.hf_server import HFServer, default_threads

QUESTIONS = (  # the first five get 64-token greedy replies from the embedded model; the rest stop early
    "Write a function that returns the n-th Fibonacci number iteratively.",
    "How do I read a CSV file with the csv module? Show code.",
    "Write a bash one-liner that counts lines in all .py files, and explain it.",
    "Write a SQL query that returns the 3 highest salaries from an employees table.",
    "Implement binary search in Python and state its complexity.",
    "Write a Python function that checks whether a string is a palindrome, and explain it.",
    "Explain the difference between a list and a tuple in Python, with examples.",
    "What does the `yield` keyword do in Python? Give an example.",
)


@dataclass
class RunResult:
    """One way of generating: its outputs (trimmed after the first EOS) and wall time."""

    name: str
    outputs: list[list[int]]
    seconds: float

    @property
    def tokens(self) -> int:
        return sum(len(o) for o in self.outputs)


def trim_after_eos(ids: list[int], eos_ids: frozenset[int]) -> list[int]:
    """Cut ``ids`` just after the first EOS (model.generate pads finished rows; HFServer stops there)."""
    for i, token in enumerate(ids):
        if token in eos_ids:
            return ids[: i + 1]
    return ids


def chat_prompts(tokenizer: Any, n: int) -> list[list[int]]:
    """``n`` tokenized chat prompts (questions repeat after eight)."""
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], add_generation_prompt=True, tokenize=True
        )["input_ids"]
        for i in range(n)
    ]


def run_generate(
    model: Any, prompts: Sequence[list[int]], max_tokens: int, eos_ids: frozenset[int], pad_id: int
) -> list[list[int]]:
    """Greedy ``model.generate`` on ``prompts`` as one left-padded batch."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens, do_sample=False, pad_token_id=pad_id
        )
    return [trim_after_eos(row[width:].tolist(), eos_ids) for row in out]


async def _serve_all(server: HFServer, prompts: Sequence[list[int]], max_tokens: int) -> list[list[int]]:
    params = {"temperature": 0, "max_tokens": max_tokens, "logprobs": True}
    outs = await asyncio.gather(
        *(server.generate(f"cmp-{i}", prompt_ids=list(p), sampling_params=params) for i, p in enumerate(prompts))
    )
    return [o.token_ids for o in outs]


def compare(model: Any, prompts: Sequence[list[int]], max_tokens: int, num_threads: int) -> list[RunResult]:
    """Run the three ways (after a short warm-up) and return their results, reference first."""
    torch.set_num_threads(num_threads)
    server = HFServer(model, num_threads=num_threads, max_batch_size=max(8, len(prompts)))
    eos_ids, pad_id = server.eos_ids, server.pad_id
    try:
        run_generate(model, prompts[:1], 2, eos_ids, pad_id)
        asyncio.run(_serve_all(server, prompts[:1], 2))
        results = []
        for name, run in (
            (
                "model.generate, sequential",
                lambda: [run_generate(model, [p], max_tokens, eos_ids, pad_id)[0] for p in prompts],
            ),
            (
                f"model.generate, batch of {len(prompts)}",
                lambda: run_generate(model, prompts, max_tokens, eos_ids, pad_id),
            ),
            (f"HFServer, {len(prompts)} concurrent", lambda: asyncio.run(_serve_all(server, prompts, max_tokens))),
        ):
            start = time.perf_counter()
            outputs = run()
            results.append(RunResult(name, outputs, time.perf_counter() - start))
    finally:
        server.close()
    return results


def format_table(results: Sequence[RunResult]) -> str:
    """A fixed-width table; ``identical`` counts sequences equal to the first (reference) run's."""
    reference = results[0].outputs
    lines = [f"{'run':<28} {'tokens':>7} {'seconds':>8} {'tok/s':>7}  identical", "-" * 62]
    for r in results:
        same = sum(a == b for a, b in zip(r.outputs, reference, strict=True))
        lines.append(
            f"{r.name:<28} {r.tokens:>7} {r.seconds:>8.1f} {r.tokens / r.seconds:>7.2f}  {same}/{len(reference)}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4, help="concurrent requests / batch size")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the embedded model")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="dtype to run in")
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from extensions.backends.embedded_model import ensure_embedded_model, validate_model_dir

    model_dir = validate_model_dir(args.model_dir) if args.model_dir else ensure_embedded_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, args.dtype)).eval()
    results = compare(model, chat_prompts(tokenizer, args.n), args.max_tokens, args.threads)
    print(f"{model_dir} ({model.dtype}, {args.threads} threads), n={args.n}, max_tokens={args.max_tokens}")
    print(format_table(results))
    print("first reply:", repr(tokenizer.decode(results[-1].outputs[0])))


if __name__ == "__main__":
    main()
