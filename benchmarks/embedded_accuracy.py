"""Accuracy of the embedded model's weight settings (float32 / bfloat16 / int8) on GSM8K test problems.

    python -m benchmarks.embedded_accuracy --gsm8k "$LONGFLOW_GSM8K_DIR/test.jsonl" --n 50 --weights int8
    LONGFLOW_GSM8K_TEST=/path/test.jsonl python -m benchmarks.embedded_accuracy --weights float32 --max-tokens 256

One turn, no tools: the pack's GSM8K system prompt (``extensions.data.prompts.system_prompt(())``) and the
question, greedy, at most ``--max-tokens`` tokens, ``--batch`` concurrent requests on one ``HFServer``.
Scored with the reward's own ``score_gsm8k`` in ``flexible`` mode (last number) and ``strict`` mode
(``#### N``). Writes per-problem replies and the totals to ``--out`` (JSON), so two settings can be compared
problem by problem (``--compare a.json b.json``: agreement of answers and of greedy tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from extensions.backends.hf_server import HFServer
from extensions.backends.weights import WEIGHTS, load_model
from extensions.custom_rewards import score_gsm8k
from extensions.data.prompts import system_prompt
from extensions.data.sources import default_gsm8k_source, read_rows


def read_problems(source: str, n: int) -> list[dict[str, str]]:
    """The first ``n`` rows ``{"question", "answer": "... #### N"}`` of GSM8K test: a local file or a HF id."""
    rows = read_rows(source, split="test", hf_config="main")[:n]
    return [{"question": r["question"], "truth": r["answer"].rsplit("####", 1)[1].strip()} for r in rows]


async def solve(server: HFServer, tokenizer: Any, problems: list[dict[str, str]], args: argparse.Namespace) -> None:
    gate = asyncio.Semaphore(args.batch)
    system = system_prompt(())

    async def one(i: int, problem: dict[str, str]) -> None:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": problem["question"]}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
        async with gate:
            out = await server.generate(
                f"gsm8k-{i}", prompt_ids=ids, sampling_params={"temperature": 0, "max_tokens": args.max_tokens}
            )
        text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
        problem["reply_ids"], problem["reply"] = out.token_ids, text
        problem["flexible"] = score_gsm8k(text, problem["truth"], "flexible")[0]
        problem["strict"] = score_gsm8k(text, problem["truth"], "strict")[0]

    await asyncio.gather(*(one(i, p) for i, p in enumerate(problems)))


def compare(paths: Sequence[Path]) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in paths)
    pairs = list(zip(a["problems"], b["problems"], strict=True))
    same_tokens = sum(x["reply_ids"] == y["reply_ids"] for x, y in pairs)
    same_verdict = sum(x["flexible"] == y["flexible"] for x, y in pairs)
    print(
        f"{a['weights']} vs {b['weights']} on {len(pairs)} problems: accuracy (flexible) {a['flexible']:.3f} vs "
        f"{b['flexible']:.3f}, strict {a['strict']:.3f} vs {b['strict']:.3f}; identical greedy replies "
        f"{same_tokens}/{len(pairs)}; same verdict {same_verdict}/{len(pairs)}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--gsm8k",
        default=os.environ.get("LONGFLOW_GSM8K_TEST") or default_gsm8k_source("test"),
        help="GSM8K test: a .jsonl file or a Hugging Face id (default $LONGFLOW_GSM8K_TEST, "
        "else $LONGFLOW_GSM8K_DIR/test.jsonl, else openai/gsm8k)",
    )
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--weights", choices=WEIGHTS, default="float32")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None, help="default docs/benchmarks/accuracy_<weights>.json")
    parser.add_argument("--compare", nargs=2, type=Path, help="compare two result files and exit")
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.compare)
        return
    from transformers import AutoTokenizer

    from extensions.backends.embedded_model import ensure_embedded_model

    problems = read_problems(args.gsm8k, args.n)
    model_dir = ensure_embedded_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    server = HFServer(load_model(model_dir, args.weights), max_batch_size=args.batch)
    started = time.perf_counter()
    try:
        asyncio.run(solve(server, tokenizer, problems, args))
    finally:
        server.close()
    seconds = time.perf_counter() - started
    result = {
        "weights": args.weights,
        "command": f"python -m benchmarks.embedded_accuracy --n {args.n} --weights {args.weights} "
        f"--max-tokens {args.max_tokens} --batch {args.batch}",
        "n": len(problems),
        "flexible": sum(p["flexible"] for p in problems) / len(problems),
        "strict": sum(p["strict"] for p in problems) / len(problems),
        "generated_tokens": sum(len(p["reply_ids"]) for p in problems),
        "seconds": round(seconds, 1),
        "load_avg_end": os.getloadavg(),
        "problems": problems,
    }
    out = args.out or Path(f"docs/benchmarks/accuracy_{args.weights}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{args.weights}: flexible {result['flexible']:.3f}, strict {result['strict']:.3f} on {len(problems)} "
        f"problems; {result['generated_tokens']} tokens in {seconds:.0f} s -> {out}"
    )


if __name__ == "__main__":
    main()
