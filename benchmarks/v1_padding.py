"""The driver's share of a verl v1 training step on a folding-shaped batch, by ``ppo_mini_batch_size``.

    python -m benchmarks.v1_padding [--trajectories 128] [--gpus 1] [--mini-batch 192 24] [--padding-row-tokens 128 0]
        [--repeat 3] [--whole-batch] [--json OUT.json]

verl 0.9.1's v1 trainer pads every batch to a multiple of ``ppo_mini_batch_size x rollout.n`` rows
(``upsample_batch_to_divisible_size``: deep copies of the first row, put into TransferQueue). Folding's presets
set the mini-batch to the batch's most possible segments (one optimizer step a training step), so ~160 real rows
become 1,536 (docs/results/folding-scaling-h200x2). This runs verl's real ``_balance_batch`` (the padding and the
sequence-length balancing), ``_compute_advantage`` (GRPO, with the pack's hooks: segment weights, checks) and
``_compute_metrics`` on batches in a real TransferQueue on this CPU, for each mini-batch size and padding-row
length (verl's 128 tokens, and the pack's default: ``extensions/verl_compat/padding_rows.py``), and with
``--whole-batch`` also with ``trainer.v1.whole_batch_update`` (padded to the ranks only), and prints the
median seconds of ``--repeat`` batches for each and the tokens the actor would run on (padding rows included). Rows are shaped as the flagged-ledger runs': 1-3 segments a
trajectory (1.27 on average at 128 trajectories), prompts of
389-790 tokens, responses up to 1,248, a page of tool output a turn. The actor's time on the padding rows (GPU) is not
measured here: its tokens are.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from extensions.qwen_tokenizer import cached_qwen_model_dir
from extensions.verl_config import compose_verl_config

N = 8  # rollout.n, as the runs
PHASES = ("balance_s", "adv_s", "metrics_s")
PAGE = "T00001 | day 1 | ACC-122F | deposit | 13 | repairs 9687 Contoso ref 726576\n" * 4


def extras(turns: int, segment: int, segments: int) -> dict[str, Any]:
    """The loop's record of one segment: alternating assistant turns and read_page results."""
    records = []
    for t in range(turns):
        span = [t * 300, t * 300 + 40]
        if t % 2 == 0:
            records.append({"index": t, "role": "assistant", "span": span, "tool_calls": ["read_page"]})
        else:
            call = {"name": "read_page", "arguments": '{"page": 3}', "executed": True, "succeeded": True}
            records.append({"index": t, "role": "tool", "span": span, "tool_calls": [call | {"result": PAGE}]})
    return {
        "agent_name": "folding_flagged",
        "termination_reason": "final_answer",
        "error": None,
        "turns": records,
        "assistant_turns": (turns + 1) // 2,
        "executed_calls": turns // 2,
        "segment": segment,
        "num_segments": segments,
        "started_at": 1.0,
        "finished_at": 2.0,
    }


def folding_rows(trajectories: int, seed: int = 0) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """Keys ``{uid}_{session}_{segment}``, fields and tags of a folding batch (``trajectories / N`` groups)."""
    rng = random.Random(seed)
    keys, fields, tags = [], [], []
    for group in range(trajectories // N):
        uid = f"g{group:05d}"
        for session in range(N):
            segments = 3 if rng.random() < 0.03 else 2 if rng.random() < 0.2 else 1
            for segment in range(segments):
                prompt_len = rng.randint(389, 790) if segment else 389
                response_len = min(1248, max(8, int(rng.lognormvariate(5.8, 0.7))))
                mask = torch.ones(response_len, dtype=torch.int64)
                mask[response_len // 3 : response_len // 2] = 0  # a tool result inside the response
                score = torch.zeros(response_len)
                score[-1] = float(segment == segments - 1 and rng.random() < 0.1)
                ids = torch.randint(0, 150_000, (prompt_len + response_len,))
                record = extras(max(2, min(40, response_len // 60)), segment, segments)
                fields.append(
                    {
                        "prompts": ids[:prompt_len],
                        "responses": ids[prompt_len:],
                        "response_mask": mask,
                        "rollout_log_probs": -torch.rand(response_len),
                        "rm_scores": score,
                        "input_ids": ids,
                        "attention_mask": torch.ones_like(ids),
                        "position_ids": torch.arange(ids.numel()),
                        "num_turns": len(record["turns"]),
                        "extra_fields": {"extras": record, "min_global_steps": 1, "max_global_steps": 1},
                        "data_source": "longflow/ledger",
                        "agent_name": "folding_flagged",
                        "uid": uid,
                        "session_id": session,
                        "global_steps": 1,
                    }
                )
                keys.append(f"{uid}_{session}_{segment}")
                tags.append(
                    {
                        "status": "success",
                        "seq_len": prompt_len + response_len,
                        "global_steps": 1,
                        "min_global_steps": 1,
                        "max_global_steps": 1,
                    }
                )
    return keys, fields, tags


def trainer(
    qwen_dir: Path,
    trajectories: int,
    gpus: int,
    mini_batch: int,
    padding_row_tokens: int | None = None,
    whole_batch: bool = False,
) -> Any:
    """verl's v1 sync trainer, built on the driver only (no workers): what the three phases need.
    ``padding_row_tokens``: ``trainer.v1.padding_row_tokens`` (None: the pack's default for an FSDP actor, 2);
    ``whole_batch``: ``trainer.v1.whole_batch_update`` (micro-batches by tokens, as it needs)."""
    from transformers import AutoTokenizer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    config = compose_verl_config(
        [
            f"actor_rollout_ref.model.path={qwen_dir}",
            f"actor_rollout_ref.rollout.n={N}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch}",
            f"data.train_batch_size={trajectories // N}",
            "algorithm.adv_estimator=grpo",
            "algorithm.use_kl_in_reward=false",
            "algorithm.rollout_correction.bypass_mode=true",
            "critic.enable=false",
            *([f"+trainer.v1.padding_row_tokens={padding_row_tokens}"] if padding_row_tokens else []),
            *(
                ["+trainer.v1.whole_batch_update=true", "actor_rollout_ref.actor.use_dynamic_bsz=true"]
                if whole_batch
                else []
            ),
        ]
    )
    made = PPOTrainerSync(config)
    made.global_steps = 2
    made.tokenizer = AutoTokenizer.from_pretrained(qwen_dir)
    made.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": list(range(gpus))})  # dp ranks
    made.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: gpus)
    return made


def measure(step: Any, rows: tuple[list, list, list], partition: str) -> dict[str, float]:
    """One batch of ``rows`` through ``step``'s padding, advantage and metrics steps, each timed."""
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, fields, tags = rows
    for start in range(0, len(keys), 64):  # the workers put a few trajectories at a time
        part = slice(start, start + 64)
        tq.kv_batch_put(
            keys=keys[part], partition_id=partition, fields=list_of_dict_to_tensordict(fields[part]), tags=tags[part]
        )
    batch = tq.KVBatchMeta(partition_id=partition, keys=keys, tags=tags)  # it copies the tags; reorder rebinds
    metrics: dict[str, Any] = {}
    figures = {"mini_batch": int(step.config.actor_rollout_ref.actor.ppo_mini_batch_size), "rows": len(keys)}
    started = time.perf_counter()
    batch = step._balance_batch(batch, metrics=metrics)
    figures["padded_rows"] = len(batch.keys)
    figures["tokens"] = sum(tag["seq_len"] for tag in batch.tags)  # what the actor runs forward and backward
    figures["padding_tokens"] = sum(tag["seq_len"] for tag in batch.tags if tag.get("is_padding", False))
    figures["balance_s"] = time.perf_counter() - started
    started = time.perf_counter()
    batch = step._compute_advantage(batch, metrics)
    figures["adv_s"] = time.perf_counter() - started
    started = time.perf_counter()
    step._compute_metrics(batch, metrics, {"gen": 1.0, "update_actor": 1.0, "step": 3.0}, 2, 0)
    figures["metrics_s"] = time.perf_counter() - started
    tq.kv_clear(keys=batch.keys, partition_id=partition)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", type=int, default=128, help="a GPU's trajectories a step (16 prompts x 8)")
    ap.add_argument("--gpus", type=int, default=1, help="data-parallel ranks: the batch and mini-batch grow with them")
    ap.add_argument("--mini-batch", type=int, nargs="+", default=[192, 24], help="ppo_mini_batch_size a GPU")
    ap.add_argument("--repeat", type=int, default=3, help="batches a mini-batch size; the median is printed")
    ap.add_argument(
        "--padding-row-tokens",
        type=int,
        nargs="+",
        default=[128, 0],
        help="trainer.v1.padding_row_tokens to compare (128: verl's own rows; 0: the pack's default, 2 on FSDP)",
    )
    ap.add_argument(
        "--whole-batch",
        action="store_true",
        help="also trainer.v1.whole_batch_update (the batch padded to the ranks only), with the pack's padding rows",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import ray
    import transfer_queue as tq

    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        trajectories = args.trajectories * args.gpus
        rows = folding_rows(trajectories)  # the same batch for every mini-batch size and repeat
        results = []

        def medians(step: Any, name: str) -> dict[str, Any]:  # the first batch's figures, the phases' medians
            runs = [measure(step, rows, f"{name}_{r}") for r in range(args.repeat)]
            return runs[0] | {k: statistics.median(run[k] for run in runs) for k in PHASES}

        for m in args.mini_batch:  # the first batch of a process also pays for imports and warm-up: in the spread
            for tokens in args.padding_row_tokens:
                step = trainer(cached_qwen_model_dir(), trajectories, args.gpus, m * args.gpus, tokens or None)
                results.append(medians(step, f"train{m}_{tokens}") | {"padding_row_tokens": tokens or "default"})
        if args.whole_batch:
            step = trainer(cached_qwen_model_dir(), trajectories, args.gpus, args.mini_batch[0] * args.gpus, None, True)
            whole = {"padding_row_tokens": "default", "mini_batch": "whole batch"}
            results.append(medians(step, "train_whole") | whole)
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()
    print(
        "| mini-batch | padding row tokens | rows | padded to | tokens | padding tokens | balance s | adv s | metrics s |"
        "\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in results:
        share = r["padding_tokens"] / r["tokens"]
        label = r["mini_batch"] if r["mini_batch"] == "whole batch" else f"{r['mini_batch']} x {N}"
        print(
            f"| {label} | {r['padding_row_tokens']} | {r['rows']} | {r['padded_rows']} "
            f"| {r['tokens']:,} | {r['padding_tokens']:,} ({share:.1%}) | {r['balance_s']:.2f} "
            f"| {r['adv_s']:.2f} | {r['metrics_s']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
