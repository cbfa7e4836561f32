"""Supervised fine-tuning on recorded trajectories: each segment's trained tokens (response mask 1), nothing else.

    python -m extensions.warm_start.sft --records DEMOS/trajectories.jsonl --model MODEL_DIR --out OUT_DIR \
        [--epochs 2] [--lr 1e-5] [--batch-size 32] [--micro-tokens 16384] [--min-reward 1.0] [--seed 0]

The rows are the rollout driver's records (``python -m extensions.rollout ... --backend demo`` writes
demonstrations): every segment of a folded trajectory is its own row, prompt and response as the loop built them,
token for token, so the fine-tuned policy learns exactly what the RL loop will ask of it (tool calls, the summary
after the loop's ``summary_prefix``); tool results, user turns and the prompt are context (label -100).
Trajectories whose reward is below ``--min-reward`` are left out, and the count is printed. The loss is the
token mean over each optimizer step's trained tokens; the LM head runs on those positions only (a 151K-token
vocabulary over every position would dominate the memory). Writes the model (in the source's dtype) with the
source's tokenizer and chat-template files, ``sft_steps.csv`` (one row per step) and ``sft_summary.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from extensions.errors import ConfigError, LongflowError
from extensions.rollout.records import TrajectoryRecord, read_jsonl

IGNORE = -100
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf", "*.safetensors.index.json", "*.bin.index.json")
NOT_COPIED = ("config.json", "longflow_embedded.json")  # written anew; the base weights' provenance (not these)


@dataclass(frozen=True)
class Example:
    """One training row: a segment's prompt and response; labels are the response tokens with mask 1."""

    input_ids: list[int]
    labels: list[int]


def segment_example(prompt_ids: list[int], response_ids: list[int], response_mask: list[int]) -> Example:
    labels = [IGNORE] * len(prompt_ids) + [t if m else IGNORE for t, m in zip(response_ids, response_mask, strict=True)]
    return Example(input_ids=[*prompt_ids, *response_ids], labels=labels)


def examples(records: list[TrajectoryRecord], min_reward: float | None) -> tuple[list[Example], int]:
    """(rows of every kept trajectory's segments, in order; trajectories left out for their reward)."""
    rows, left_out = [], 0
    for record in records:
        if min_reward is not None and (record.reward is None or record.reward < min_reward):
            left_out += 1
            continue
        for part in [*record.segments, record]:
            rows.append(segment_example(part.prompt_ids, part.response_ids, part.response_mask))
    return [row for row in rows if any(label != IGNORE for label in row.labels)], left_out


def steps(rows: list[Example], batch_size: int, micro_tokens: int, rng: random.Random) -> list[list[list[Example]]]:
    """One epoch: shuffled optimizer steps of ``batch_size`` rows, each cut into micro-batches of at most
    ``micro_tokens`` padded tokens (rows sorted by length inside a step, so padding stays small)."""
    order = rows[:]
    rng.shuffle(order)
    out = []
    for start in range(0, len(order), batch_size):
        step, micro, longest = sorted(order[start : start + batch_size], key=lambda r: len(r.input_ids)), [], 0
        micros = []
        for row in step:
            longest = max(longest, len(row.input_ids))
            if micro and longest * (len(micro) + 1) > micro_tokens:
                micros.append(micro)
                micro, longest = [], len(row.input_ids)
            micro.append(row)
        micros.append(micro)
        out.append(micros)
    return out


def collate(rows: list[Example], pad_id: int) -> tuple[object, object, object]:
    """Right-padded (input_ids, attention_mask, labels) tensors."""
    import torch

    width = max(len(r.input_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        n = len(row.input_ids)
        ids[i, :n], labels[i, :n], attention[i, :n] = torch.tensor(row.input_ids), torch.tensor(row.labels), 1
    return ids, attention, labels


def micro_loss_sum(model: object, ids: object, attention: object, labels: object) -> object:
    """Summed next-token cross-entropy over the labelled positions (the LM head on those alone)."""
    import torch.nn.functional as F

    hidden = model.get_decoder()(input_ids=ids, attention_mask=attention).last_hidden_state
    targets = labels[:, 1:]
    where = (targets != IGNORE).nonzero(as_tuple=True)
    logits = model.get_output_embeddings()(hidden[:, :-1][where]).float()
    return F.cross_entropy(logits, targets[where], reduction="sum")


def source_weights_dtype(model_dir: Path) -> object:
    """The torch dtype the source's config.json names (``dtype``, or ``torch_dtype`` in older files); float32 if none."""
    import torch

    config = json.loads((model_dir / "config.json").read_text())
    name = config.get("dtype") or config.get("torch_dtype") or "float32"
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ConfigError(f"{model_dir / 'config.json'}: dtype {name!r} is not a torch dtype (e.g. bfloat16, float32)")
    return dtype


def copy_tokenizer_files(source: Path, out: Path) -> None:
    """Everything of the source model folder but its weights, config and provenance (tokenizer, chat template,
    generation config)."""
    weights = {p for pattern in WEIGHT_FILES for p in source.glob(pattern)}
    for path in source.iterdir():
        if path.is_file() and path not in weights and path.name not in NOT_COPIED:
            shutil.copy2(path, out / path.name)


def train(args: argparse.Namespace) -> dict[str, object]:
    import torch
    from transformers import AutoModelForCausalLM

    records = [r for path in args.records for r in read_jsonl(path)]
    rows, left_out = examples(records, args.min_reward)
    if not rows:
        raise ConfigError(f"--records {' '.join(map(str, args.records))}: no trajectory with a trained token was kept")
    print(f"sft: {len(rows)} rows from {len(records) - left_out} trajectories ({left_out} left out, reward below "
          f"{args.min_reward}); {sum(len(r.input_ids) for r in rows)} tokens, "
          f"{sum(label != IGNORE for r in rows for label in r.labels)} trained", flush=True)  # fmt: skip
    device = "cuda" if torch.cuda.is_available() else "cpu"
    source_dtype = source_weights_dtype(Path(args.model))  # before loading: loading in float32 rewrites the config's
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device)
    model.config.use_cache = False
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    rng, out = random.Random(args.seed), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = [
        (epoch, micros)
        for epoch in range(args.epochs)
        for micros in steps(rows, args.batch_size, args.micro_tokens, rng)
    ]
    warmup = max(1, int(args.warmup * len(plan)))
    log, started = [], time.perf_counter()
    with (out / "sft_steps.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "epoch", "lr", "loss", "rows", "tokens", "trained_tokens", "grad_norm", "seconds"])
        for step, (epoch, micros) in enumerate(plan, start=1):
            t0 = time.perf_counter()
            lr = args.lr * min(1.0, step / warmup)
            for group in optimizer.param_groups:
                group["lr"] = lr
            trained = sum(label != IGNORE for rows_ in micros for r in rows_ for label in r.labels[1:])
            total = 0.0
            for micro in micros:
                ids, attention, labels = (t.to(device) for t in collate(micro, pad_id))
                with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                    loss = micro_loss_sum(model, ids, attention, labels) / trained
                loss.backward()
                total += loss.item()
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            row = [step, epoch + 1, f"{lr:.3g}", round(total, 5), sum(map(len, micros)),
                   sum(len(r.input_ids) for m in micros for r in m), trained, round(norm, 4),
                   round(time.perf_counter() - t0, 3)]  # fmt: skip
            writer.writerow(row)
            f.flush()
            log.append(total)
            if step == 1 or step % args.log_every == 0 or step == len(plan):
                print(f"sft step {step}/{len(plan)} epoch {epoch + 1} loss {total:.4f} ({row[-1]} s)", flush=True)
    model.config.use_cache = True
    model.to(source_dtype)
    copy_tokenizer_files(Path(args.model), out)
    model.save_pretrained(out, safe_serialization=True)
    summary = {
        "rows": len(rows), "trajectories": len(records) - left_out, "left_out": left_out, "steps": len(plan),
        "first_loss": log[0], "last_loss": log[-1], "seconds": round(time.perf_counter() - started, 1),
        "device": device, "model": str(args.model), "records": [str(p) for p in args.records],
        "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size, "seed": args.seed,
    }  # fmt: skip
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m extensions.warm_start.sft", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", nargs="+", type=Path, required=True, help="trajectories .jsonl files")
    parser.add_argument("--model", type=Path, required=True, help="the Hugging Face model folder to start from")
    parser.add_argument("--out", type=Path, required=True, help="where the fine-tuned model is written")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--warmup", type=float, default=0.05, help="fraction of the steps with a linear warm-up")
    parser.add_argument("--batch-size", type=int, default=32, help="rows per optimizer step")
    parser.add_argument("--micro-tokens", type=int, default=16384, help="padded tokens per forward pass")
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--min-reward", type=float, default=1.0, help="leave out trajectories scored below this")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size", "micro_tokens", "log_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if not args.model.is_dir():
        parser.error(f"--model {args.model}: no such folder (expected a Hugging Face model folder)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = train(args)
    except LongflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
