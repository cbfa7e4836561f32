"""The embedded CPU backend against its bound: bandwidth, decode bound, prefill/decode speed, rollout tok/s.

    python -m benchmarks.embedded_backend --trajectories outputs/main_job/trajectories.jsonl
    python -m benchmarks.embedded_backend --parts kernel              # bandwidth, bound, prefill, decode (wall and CPU-s)
    python -m benchmarks.embedded_backend --parts scripted --servers after,before --sample-turns 1,8,15

Parts (results merge into ``--out``, default ``docs/benchmarks/embedded_backend.json``, one key per part/server):
1. ``kernel``: memory read bandwidth (``torch.sum`` over 512 MiB on the server's thread count, best of 3); the
   bytes one decode step reads (every weight but the input embedding table, which is only gathered); the decode
   bound = bandwidth / bytes per step, in steps/s, so batch x steps/s tokens/s; measured prefill tokens/s
   (128-token prompt) and decode steps at batch 1 and 4 (context 128), each measured twice; all in wall
   seconds and in CPU seconds of the measuring thread (on a shared machine only the latter is stable).
2. ``main_job``: the main job's model calls replayed from its ``trajectories.jsonl``: each trajectory's
   assistant turns in order (prompt = the recorded stream before the turn, ``max_tokens`` = the recorded
   reply's length), trajectories concurrently, no tool or loop time. Generated tokens/s and how many replies
   equal the recorded ones (greedy).
3. ``scripted``: a 15-turn scripted-user conversation (one trajectory, greedy, ``--turn-tokens`` per reply,
   a short user message after each). ``after`` runs it live and records every turn's prompt; the other servers
   run ``--sample-turns`` of those prompts (all 15 when not given) and the total is interpolated linearly in
   the turn index between sampled turns (their cost is linear in the context). Per-turn seconds and turn 15 /
   turn 1.

Servers: ``plain`` = ``model.generate`` one request at a time (no batching, no reuse); ``before`` =
``HFServer(prefix_cache_bytes=0)`` (every prompt prefilled in full, as before prefix reuse landed);
``after`` = this ``HFServer`` (prefix KV reuse on). Tables: ``docs/benchmarks/embedded_backend.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from extensions.backends.hf_server import HFServer, default_threads

SERVERS = ("plain", "before", "after")
PARTS = ("kernel", "main_job", "scripted")
SCRIPTED_SYSTEM = "You are a helpful Python tutor. Answer in at most two sentences."
SCRIPTED_OPENING = "Explain what a Python list comprehension is."
SCRIPTED_USER = "Thanks. Now tell me one more fact about it, briefly."


class PlainGenerate:
    """``model.generate`` behind verl's ``generate`` signature: greedy, one request at a time."""

    def __init__(self, model: Any, eos_ids: frozenset[int], pad_id: int) -> None:
        self.model, self.eos_ids, self.pad_id = model, eos_ids, pad_id
        self._lock = threading.Lock()

    def _run(self, prompt: list[int], max_tokens: int) -> list[int]:
        with self._lock, torch.inference_mode():
            out = self.model.generate(
                input_ids=torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=max_tokens,
                do_sample=False,
                eos_token_id=sorted(self.eos_ids),
                pad_token_id=self.pad_id,
            )
        ids = out[0, len(prompt) :].tolist()
        end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_ids), len(ids))
        return ids[:end]

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        ids = await asyncio.to_thread(self._run, list(prompt_ids), int(sampling_params["max_tokens"]))
        return type("Out", (), {"token_ids": ids})()

    def close(self) -> None:
        pass


def make_server(name: str, model: Any) -> tuple[Any, str]:
    if name == "after":
        return HFServer(model), "HFServer (prefix KV reuse, 1 GiB)"
    if name == "before":  # main's HFServer before prefix reuse (f7e62c2) prefilled every prompt in full, like this
        return HFServer(model, prefix_cache_bytes=0), "HFServer with prefix reuse off (prefix_cache_bytes=0)"
    probe = HFServer(model, prefix_cache_bytes=0)
    probe.close()
    return PlainGenerate(model, probe.eos_ids, probe.pad_id), "model.generate, one request at a time"


# --- part 1 ----------------------------------------------------------------------------------------------


def read_bandwidth(threads: int, mib: int = 512, repeats: int = 3) -> dict[str, float]:
    """GB/s of ``torch.sum`` over ``mib`` MiB, per wall second and per CPU second of this thread (with one
    thread the sum runs here; on a shared machine the CPU figure leaves out time other processes held the core)."""
    torch.set_num_threads(threads)
    x = torch.ones(mib * (1 << 20) // 4)
    x.sum()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        x.sum()
        wall.append(x.numel() * 4 / (time.perf_counter() - start) / 1e9)
        cpu.append(x.numel() * 4 / (time.thread_time() - start_cpu) / 1e9)
    wall.sort()
    cpu.sort()
    return {
        "best_GBps": round(wall[-1], 2),
        "median_GBps": round(wall[len(wall) // 2], 2),
        "best_GBps_per_cpu_s": round(cpu[-1], 2),
        "median_GBps_per_cpu_s": round(cpu[len(cpu) // 2], 2),
        "MiB": mib,
    }


def decode_bytes(model: Any) -> int:
    """Bytes of parameters one decode step reads: all but the input embedding table (a gather of B rows)."""
    return sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "embed_tokens" not in n)


def _timed(fn: Any) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - start, time.thread_time() - cpu


def kernel(model: Any, threads: int, context: int = 128) -> dict[str, Any]:
    """Bandwidth, the decode bound, prefill tok/s (``context`` tokens) and decode steps at batch 1 and 4 after a
    ``context``-token prompt, each measured twice, in wall and in CPU seconds of this thread."""
    from transformers import DynamicCache

    torch.set_num_threads(threads)
    result: dict[str, Any] = {"threads": threads, "bandwidth": read_bandwidth(threads)}
    step_bytes = decode_bytes(model)
    result["decode_bytes_per_step"] = step_bytes
    for clock, key in (("wall", "best_GBps"), ("cpu", "best_GBps_per_cpu_s")):
        bound = result["bandwidth"][key] * 1e9 / step_bytes
        result[f"bound_steps_per_s_{clock}"] = round(bound, 3)
        result[f"bound_tok_s_{clock}"] = {f"batch_{b}": round(b * bound, 2) for b in (1, 4, 8)}
    prompt = torch.randint(1000, 30000, (1, context), generator=torch.Generator().manual_seed(0))
    run = lambda ids, cache: model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)  # noqa: E731
    prefill: list[tuple[float, float]] = []
    steps: dict[int, list[tuple[float, float]]] = {1: [], 4: []}
    with torch.inference_mode():
        for _ in range(2):
            prefill.append(_timed(lambda: run(prompt, DynamicCache(config=model.config))))
            for batch in (1, 4):
                cache = DynamicCache(config=model.config)
                run(prompt.repeat(batch, 1), cache)
                token = torch.full((batch, 1), 1234)
                wall, cpu = _timed(lambda cache=cache, token=token: [run(token, cache) for _ in range(8)])
                steps[batch].append((wall / 8, cpu / 8))
    result["prefill_tok_s"] = {c: [round(context / t[i], 1) for t in prefill] for i, c in enumerate(("wall", "cpu"))}
    result["decode_step_s"] = {
        c: {f"batch_{b}": [round(t[i], 3) for t in s] for b, s in steps.items()} for i, c in enumerate(("wall", "cpu"))
    }
    bound_cpu = result["bound_steps_per_s_cpu"]
    result["decode_step_cpu_vs_bound"] = {
        f"batch_{b}": round(min(t[1] for t in s) * bound_cpu, 2) for b, s in steps.items()
    }
    return result


# --- part 2 ----------------------------------------------------------------------------------------------


def replay_turns(path: Path) -> list[list[tuple[list[int], list[int]]]]:
    """Per trajectory, its assistant turns as (prompt ids, recorded reply ids): runs of response_mask 1."""
    trajectories = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        prompt, response, mask = record["prompt_ids"], record["response_ids"], record["response_mask"]
        turns, i = [], 0
        while i < len(mask):
            if mask[i] == 1:
                j = i
                while j < len(mask) and mask[j] == 1:
                    j += 1
                turns.append((prompt + response[:i], response[i:j]))
                i = j
            else:
                i += 1
        trajectories.append(turns)
    return trajectories


async def run_replay(server: Any, trajectories: list[list[tuple[list[int], list[int]]]]) -> dict[str, Any]:
    async def one(t: int, turns: list[tuple[list[int], list[int]]]) -> list[bool]:
        same = []
        for k, (prompt, reply) in enumerate(turns):
            params = {"temperature": 0, "max_tokens": len(reply)}
            out = await server.generate(f"t{t}-{k}", prompt_ids=prompt, sampling_params=params)
            same.append(list(out.token_ids) == reply)
        return same

    start, cpu = time.perf_counter(), time.process_time()
    same = await asyncio.gather(*(one(t, turns) for t, turns in enumerate(trajectories)))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(len(reply) for turns in trajectories for _, reply in turns)
    return {
        "trajectories": len(trajectories),
        "assistant_turns": sum(len(t) for t in trajectories),
        "prompt_tokens": sum(len(p) for turns in trajectories for p, _ in turns),
        "generated_tokens": tokens,
        "seconds": round(seconds, 1),
        "gen_tok_s": round(tokens / seconds, 2),
        "cpu_s": round(cpu, 1),
        "gen_tok_per_cpu_s": round(tokens / cpu, 2),
        "identical_replies": f"{sum(map(sum, same))}/{sum(map(len, same))}",
    }


# --- part 3 ----------------------------------------------------------------------------------------------


def user_suffix(tokenizer: Any, reply: list[int]) -> list[int]:
    """Tokens after an assistant reply: close it if it was cut, then the scripted user turn and the next header."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    text = f"\n<|im_start|>user\n{SCRIPTED_USER}<|im_end|>\n<|im_start|>assistant\n"
    return ([] if reply and reply[-1] == end else [end]) + tokenizer.encode(text, add_special_tokens=False)


async def scripted_live(server: Any, tokenizer: Any, turns: int, turn_tokens: int) -> dict[str, Any]:
    messages = [{"role": "system", "content": SCRIPTED_SYSTEM}, {"role": "user", "content": SCRIPTED_OPENING}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
    records = []
    for k in range(turns):
        start, cpu = time.perf_counter(), time.process_time()
        out = await server.generate(
            f"s{k}", prompt_ids=prompt, sampling_params={"temperature": 0, "max_tokens": turn_tokens}
        )
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        records.append({"turn": k + 1, "prompt": prompt, "reply": list(out.token_ids), "s": elapsed, "cpu_s": cpu})
        prompt = prompt + list(out.token_ids) + user_suffix(tokenizer, list(out.token_ids))
    return {"records": records}


async def scripted_sampled(server: Any, records: list[dict[str, Any]], sample: Sequence[int]) -> dict[str, Any]:
    timed = []
    for record in records:
        if record["turn"] not in sample:
            continue
        start, cpu = time.perf_counter(), time.process_time()
        params = {"temperature": 0, "max_tokens": len(record["reply"])}
        out = await server.generate(f"s{record['turn']}", prompt_ids=record["prompt"], sampling_params=params)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        timed.append({**record, "s": elapsed, "cpu_s": cpu, "same": list(out.token_ids) == record["reply"]})
    return {"records": timed}


def interpolated_total(per_turn: dict[int, float], turns: int) -> float:
    """Sum over turns 1..``turns`` of ``per_turn``, linear between the measured turns (flat beyond them)."""
    points, total = sorted(per_turn), 0.0
    for k in range(1, turns + 1):
        lo = max((p for p in points if p <= k), default=points[0])
        hi = min((p for p in points if p >= k), default=points[-1])
        total += per_turn[lo] if hi == lo else per_turn[lo] + (per_turn[hi] - per_turn[lo]) * (k - lo) / (hi - lo)
    return total


def summarize_scripted(records: list[dict[str, Any]], turns: int, total_tokens: int | None = None) -> dict[str, Any]:
    """Per-turn wall and CPU seconds, turn last / turn first, and generated tokens per (interpolated) total."""
    wall = {r["turn"]: r["s"] for r in records}
    cpu = {r["turn"]: r.get("cpu_s", r["s"]) for r in records}
    points = sorted(wall)
    tokens = total_tokens or sum(len(r["reply"]) for r in records) * turns / len(records)
    total_wall, total_cpu = interpolated_total(wall, turns), interpolated_total(cpu, turns)
    return {
        "turns": turns,
        "measured_turns": points,
        "per_turn_s": {str(k): round(v, 2) for k, v in wall.items()},
        "per_turn_cpu_s": {str(k): round(v, 2) for k, v in cpu.items()},
        "context_tokens": {str(r["turn"]): len(r["prompt"]) for r in records},
        "turn_last_over_first": round(wall[points[-1]] / wall[points[0]], 2),
        "turn_last_over_first_cpu": round(cpu[points[-1]] / cpu[points[0]], 2),
        "total_s": round(total_wall, 1),
        "total_cpu_s": round(total_cpu, 1),
        "total_is_interpolated": len(points) < turns,
        "generated_tokens": int(tokens),
        "gen_tok_s": round(tokens / total_wall, 2),
        "gen_tok_per_cpu_s": round(tokens / total_cpu, 2),
        "identical_replies": f"{sum(r.get('same', True) for r in records)}/{len(records)}",
    }


# --- tables ----------------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    """The JSON's figures as markdown tables (``--table``)."""
    lines = []
    if k := result.get("kernel"):
        bw, cpu = k["bandwidth"], k["decode_step_s"]["cpu"]
        lines += [
            "| threads | read GB/s per CPU-s (wall) | bytes read per decode step | bound, steps per CPU-s | "
            "bound tok per CPU-s at batch 1 / 4 / 8 | prefill tok per CPU-s (2 runs) | decode step CPU s, batch 1 | "
            "decode step CPU s, batch 4 | measured step / bound, batch 1 / 4 |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {k['threads']} | {bw['best_GBps_per_cpu_s']} ({bw['best_GBps']}) | {k['decode_bytes_per_step'] / 1e9:.2f} GB | "
            f"{k['bound_steps_per_s_cpu']} | {' / '.join(str(v) for v in k['bound_tok_s_cpu'].values())} | "
            f"{', '.join(map(str, k['prefill_tok_s']['cpu']))} | {', '.join(map(str, cpu['batch_1']))} | "
            f"{', '.join(map(str, cpu['batch_4']))} | "
            f"{k['decode_step_cpu_vs_bound']['batch_1']} / {k['decode_step_cpu_vs_bound']['batch_4']} |",
            "",
        ]
    rows = [(key.split("/")[1], v) for key, v in result.items() if key.startswith("main_job/")]
    if rows:
        lines += [
            "| server | trajectories / assistant turns | prompt tokens sent | generated tokens | wall s | "
            "generated tok/s (wall) | CPU s | generated tok per CPU s | replies identical to the recorded run |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {n} | {v['trajectories']} / {v['assistant_turns']} | {v['prompt_tokens']} | {v['generated_tokens']} | "
            f"{v['seconds']} | {v['gen_tok_s']} | {v['cpu_s']} | {v['gen_tok_per_cpu_s']} | {v['identical_replies']} |"
            for n, v in rows
        ]
        lines.append("")
    rows = [(key.split("/")[1], v) for key, v in result.items() if key.startswith("scripted/") and "records" not in key]
    if rows:
        lines += [
            "| server | turns measured | context tokens, first -> last | CPU s per turn (turn: s) | "
            "last / first turn, CPU (wall) | total CPU s (wall s), 15 turns | generated tok per CPU s (per wall s) | "
            "identical replies |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, v in rows:
            ctx = v["context_tokens"]
            per = ", ".join(f"{t}: {s}" for t, s in v["per_turn_cpu_s"].items())
            total = f"{v['total_cpu_s']} ({v['total_s']}){' interpolated' if v['total_is_interpolated'] else ''}"
            lines.append(
                f"| {n} | {len(v['measured_turns'])} | {ctx[min(ctx, key=int)]} -> {ctx[max(ctx, key=int)]} | {per} | "
                f"{v['turn_last_over_first_cpu']} ({v['turn_last_over_first']}) | {total} | "
                f"{v['gen_tok_per_cpu_s']} ({v['gen_tok_s']}) | {v['identical_replies']} |"
            )
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated, of {', '.join(SERVERS)}")
    parser.add_argument("--trajectories", type=Path, default=Path("outputs/main_job/trajectories.jsonl"))
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--turn-tokens", type=int, default=24)
    parser.add_argument("--sample-turns", default="", help="turns the non-'after' servers run, e.g. 1,8,15")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/embedded_backend.json"))
    parser.add_argument("--table", action="store_true", help="print --out's figures as markdown and exit")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads(args.out.read_text())))
        return
    parts = args.parts.split(",")
    servers = sorted(args.servers.split(","), key=lambda s: s != "after")  # "after" records the scripted prompts
    from transformers import AutoTokenizer

    from extensions.backends.embedded_model import ensure_embedded_model
    from extensions.backends.weights import load_model

    model_dir = ensure_embedded_model()
    model, tokenizer = load_model(model_dir, "float32"), AutoTokenizer.from_pretrained(model_dir)
    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    result["machine"] = {"cpus": os.cpu_count(), "threads": default_threads(), "torch": torch.__version__}

    def save(key: str, value: Any) -> None:
        result[key] = {**value, "load_avg": [round(v, 2) for v in os.getloadavg()], "at": time.strftime("%H:%M")}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(key, json.dumps({k: v for k, v in value.items() if k != "records"}), flush=True)

    if "kernel" in parts:
        save("kernel", kernel(model, default_threads()))
    live_key = "scripted/after/records"
    for name in servers:
        server, origin = make_server(name, model)
        try:
            if "scripted" in parts:
                if name == "after":
                    live = asyncio.run(scripted_live(server, tokenizer, args.turns, args.turn_tokens))
                    result[live_key] = live["records"]
                    records = live["records"]
                else:
                    sample = [int(t) for t in args.sample_turns.split(",") if t] or list(range(1, args.turns + 1))
                    records = asyncio.run(scripted_sampled(server, result[live_key], sample))["records"]
                total = sum(len(r["reply"]) for r in result[live_key])
                save(f"scripted/{name}", {"server": origin, **summarize_scripted(records, args.turns, total)})
            if "main_job" in parts:
                save(
                    f"main_job/{name}",
                    {"server": origin, **asyncio.run(run_replay(server, replay_turns(args.trajectories)))},
                )
        finally:
            server.close()


if __name__ == "__main__":
    main()
