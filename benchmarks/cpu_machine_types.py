"""CPU machine types: the embedded backend with and without AVX-512, and the shipped GGUF through llama.cpp.

    python -m benchmarks.cpu_machine_types embedded --out E.json        # decode steps, layouts, threads, a profile
    python -m benchmarks.cpu_machine_types llama-replay --out L.json    # the main job's 13 model calls on llama.cpp
    python -m benchmarks.cpu_machine_types llama-gsm8k --n 50 --out G.json   # GSM8K test, one turn, greedy
    python -m benchmarks.cpu_machine_types table E.json L.json ...      # print the figures of saved runs

AVX2-only machines are emulated on an AVX-512 one by the caller's environment (same memory bandwidth,
AVX2 kernels): ``ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2`` for torch,
and a llama-cpp-python built with ``-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF`` for llama.cpp
(``--llama-path`` puts that build first on ``sys.path``). Every subcommand records what it ran on.
Write-up and figures: ``docs/benchmarks/cpu_machine_types.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file too: benchmarks.* imports

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/main_job_before_refactor.jsonl"
EOS_IDS = (151645, 151643)  # <|im_end|>, <|endoftext|>
EMULATION_ENV = ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "LONGFLOW_HF_THREADS")


def machine() -> dict[str, Any]:
    flags = Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0]
    return {
        "cpu": platform.processor()
        or next(
            (ln.split(":")[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
            "",
        ),
        "cpus": os.cpu_count(),
        "avx512f_in_cpu": "avx512f" in flags,
        "env": {k: os.environ[k] for k in EMULATION_ENV if k in os.environ},
        "load_avg_start": [round(v, 2) for v in os.getloadavg()],
    }


def save(out: Path | None, result: dict[str, Any]) -> None:
    result["load_avg_end"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(result, indent=1))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


# --- embedded backend ------------------------------------------------------------------------------------


def decode_steps(model: Any, batch: int, context: int, steps: int = 8) -> dict[int, float]:
    """Per torch thread count (1, 2): the best of 2 runs of ``steps`` decode steps at ``batch`` rows after one
    ``context``-token prefill, in wall seconds per step (the context grows by 32 tokens over the runs)."""
    import torch
    from transformers import DynamicCache

    prompt = torch.randint(1000, 30000, (batch, context), generator=torch.Generator().manual_seed(0))
    token = torch.full((batch, 1), 1234)
    result = {}
    with torch.inference_mode():
        torch.set_num_threads(2)
        cache = DynamicCache(config=model.config)
        model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            times = []
            for _ in range(2):
                start = time.perf_counter()
                for _ in range(steps):
                    model(input_ids=token, past_key_values=cache, use_cache=True, logits_to_keep=1)
                times.append((time.perf_counter() - start) / steps)
            result[threads] = round(min(times), 4)
    return result


def profile_step(model: Any, threads: int, context: int, top: int = 8) -> list[dict[str, Any]]:
    """The top ops by self CPU time of one batch-1 decode step (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache

    torch.set_num_threads(threads)
    prompt = torch.randint(1000, 30000, (1, context), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        model(input_ids=torch.full((1, 1), 1234), past_key_values=cache, use_cache=True, logits_to_keep=1)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model(input_ids=torch.full((1, 1), 99), past_key_values=cache, use_cache=True, logits_to_keep=1)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    return [
        {
            "op": e.key,
            "calls": e.count,
            "self_ms": round(e.self_cpu_time_total / 1000, 2),
            "pct": round(100 * e.self_cpu_time_total / total, 1),
        }
        for e in events[:top]
    ] + [{"op": "total", "self_ms": round(total / 1000, 2)}]


def cmd_embedded(args: argparse.Namespace) -> None:
    import torch

    from extensions.backends.embedded_model import ensure_embedded_model
    from extensions.backends.weights import load_model

    result: dict[str, Any] = {"machine": machine(), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    model = load_model(ensure_embedded_model(), "float32")  # column-major nn.Linear weights, as HFServer runs
    steps: dict[str, float] = {}
    for layout in ("column_major", "row_major"):
        if layout == "row_major":
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.weight.data = module.weight.data.contiguous()
        for batch in (1, 4):
            for threads, seconds in decode_steps(model, batch, args.context).items():
                steps[f"{layout}/threads_{threads}/batch_{batch}"] = seconds
                print(f"{layout} threads {threads} batch {batch}: {seconds} s/step", flush=True)
        if layout == "column_major":
            result["profile_batch1_2threads"] = profile_step(model, 2, args.context)
    result["decode_step_s"] = steps
    result["context"] = args.context
    save(args.out, result)


def cmd_gemv(args: argparse.Namespace) -> None:
    """ms per ``x @ W.T`` of the model's shapes at one row (a decode step's GEMV), per layout, under this env."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    result: dict[str, Any] = {"machine": machine(), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    for out_f, in_f in ((4864, 896), (896, 4864), (151936, 896)):
        weight = torch.randn(out_f, in_f)
        x = torch.randn(1, in_f)
        for layout, w in (("row_major", weight), ("column_major", weight.t().contiguous().t())):
            F.linear(x, w)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(20):
                    F.linear(x, w)
                times.append((time.perf_counter() - start) / 20)
            result[f"{out_f}x{in_f}/{layout}_ms"] = round(1000 * min(times), 3)
    save(args.out, result)


# --- llama.cpp -------------------------------------------------------------------------------------------


def load_llama(args: argparse.Namespace) -> Any:
    if args.llama_path:
        sys.path.insert(0, args.llama_path)
    import llama_cpp

    from extensions.backends.embedded_model import GGUF_NAME, cache_root

    gguf = args.gguf or cache_root() / "gguf" / GGUF_NAME
    llm = llama_cpp.Llama(
        str(gguf), n_ctx=args.n_ctx, n_threads=args.threads, n_threads_batch=args.threads, verbose=False
    )
    return llm, {
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_module": llama_cpp.__file__,
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "gguf": str(gguf),
        "threads": args.threads,
    }


def greedy(llm: Any, prompt: list[int], max_tokens: int) -> tuple[list[int], float, float]:
    """Greedy reply to ``prompt`` (llama-cpp-python reuses the longest cached prefix); stops at eos.

    Returns the ids, the seconds to the first token (prefill) and the seconds of the rest (decode)."""
    out: list[int] = []
    start = time.perf_counter()
    first = start
    for token in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        if not out:
            first = time.perf_counter()
        out.append(token)
        if token in EOS_IDS or len(out) >= max_tokens:
            break
    return out, first - start, time.perf_counter() - first


def agreement(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def cmd_llama_replay(args: argparse.Namespace) -> None:
    from benchmarks.embedded_backend import replay_turns

    load_start = time.perf_counter()
    llm, info = load_llama(args)
    result: dict[str, Any] = {"machine": machine(), "llama": info, "load_s": round(time.perf_counter() - load_start, 2)}
    trajectories = replay_turns(args.trajectories)
    calls = []
    start = time.perf_counter()
    for t, turns in enumerate(trajectories):  # one trajectory after another: the cached prefix is its last turn
        for k, (prompt, reply) in enumerate(turns):
            ids, prefill_s, decode_s = greedy(llm, prompt, len(reply))
            same = agreement(ids, reply)
            calls.append(
                {
                    "call": f"t{t}-{k}",
                    "prompt_tokens": len(prompt),
                    "recorded_tokens": len(reply),
                    "generated_tokens": len(ids),
                    "identical": ids == reply,
                    "common_prefix": same,
                    "prefill_s": round(prefill_s, 3),
                    "decode_s": round(decode_s, 3),
                }
            )
            print(json.dumps(calls[-1]), flush=True)
    seconds = time.perf_counter() - start
    tokens = sum(c["generated_tokens"] for c in calls)
    decode_s = sum(c["decode_s"] for c in calls)
    result["replay"] = {
        "calls": len(calls),
        "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
        "generated_tokens": tokens,
        "seconds": round(seconds, 1),
        "gen_tok_s": round(tokens / seconds, 2),
        "decode_tok_s": round((tokens - len(calls)) / decode_s, 2),
        "identical_replies": f"{sum(c['identical'] for c in calls)}/{len(calls)}",
        "recorded_tokens_matched_before_first_difference": f"{sum(c['common_prefix'] for c in calls)}/"
        f"{sum(c['recorded_tokens'] for c in calls)}",
    }
    result["calls"] = calls
    save(args.out, result)


def cmd_llama_gsm8k(args: argparse.Namespace) -> None:
    from transformers import AutoTokenizer

    from benchmarks.embedded_accuracy import read_problems
    from extensions.backends.embedded_model import ensure_embedded_model
    from extensions.custom_rewards import score_gsm8k
    from extensions.data.prompts import system_prompt

    llm, info = load_llama(args)
    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model())
    problems = read_problems(args.gsm8k, args.n)
    system = system_prompt(())
    start = time.perf_counter()
    for problem in problems:  # the prompt and scoring of benchmarks.embedded_accuracy
        messages = [{"role": "system", "content": system}, {"role": "user", "content": problem["question"]}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
        reply, _, _ = greedy(llm, ids, args.max_tokens)
        text = tokenizer.decode(reply, skip_special_tokens=True)
        problem["reply_ids"], problem["reply"] = reply, text
        problem["flexible"] = score_gsm8k(text, problem["truth"], "flexible")[0]
        problem["strict"] = score_gsm8k(text, problem["truth"], "strict")[0]
        print(len(reply), problem["flexible"], flush=True)
    seconds = time.perf_counter() - start
    result = {
        "weights": "llama.cpp (GGUF Q4_K_M as shipped)",
        "machine": machine(),
        "llama": info,
        "n": len(problems),
        "flexible": sum(p["flexible"] for p in problems) / len(problems),
        "strict": sum(p["strict"] for p in problems) / len(problems),
        "generated_tokens": sum(len(p["reply_ids"]) for p in problems),
        "seconds": round(seconds, 1),
        "problems": problems,
    }
    save(args.out, result)


class LlamaServer:
    """A stand-in for ``HFServer`` over llama-cpp-python, for measuring the main job only (not in the pack):
    one sequence at a time (requests wait on a lock), greedy only, stop ids / stop strings / max_tokens as
    HFServer honours them, log-probs from the logits llama.cpp sampled from."""

    def __init__(self, llm: Any, response_length: int, max_model_len: int) -> None:
        import asyncio

        self.llm, self.response_length, self.max_model_len = llm, response_length, max_model_len
        self.tokenizer: Any = None
        self.lock = asyncio.Lock()
        self.calls: list[dict[str, Any]] = []

    def _run(self, prompt: list[int], sampling: Any) -> tuple[list[int], list[float], str]:
        import llama_cpp
        import numpy as np

        ids: list[int] = []
        logprobs: list[float] = []
        reason = "length"
        for token in self.llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
            ids.append(token)
            if sampling.logprobs:
                pointer = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)  # the row ``token`` came from
                row = np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).astype(np.float64)
                logprobs.append(float(row[token] - row.max() - np.log(np.exp(row - row.max()).sum())))
            if token in sampling.stop_ids:
                reason = "completed"
                break
            if sampling.stop and any(
                stop in self.tokenizer.decode(ids[-16:], skip_special_tokens=True) for stop in sampling.stop
            ):
                reason = "completed"
                break
            if len(ids) >= sampling.max_tokens:
                break
        return ids, logprobs, reason

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        import asyncio

        from verl.workers.rollout.replica import TokenOutput

        from extensions.backends.sampling import parse_sampling_params

        prompt = [int(t) for t in prompt_ids]
        sampling = parse_sampling_params(
            sampling_params,
            prompt_len=len(prompt),
            max_model_len=self.max_model_len,
            default_max_tokens=self.response_length,
            eos_ids=frozenset(EOS_IDS),
        )
        if sampling.temperature != 0:
            raise ValueError("LlamaServer (measurement only) runs greedy decoding: temperature=0")
        async with self.lock:
            start = time.perf_counter()
            ids, logprobs, reason = await asyncio.to_thread(self._run, prompt, sampling)
        self.calls.append({"prompt": len(prompt), "generated": len(ids), "s": round(time.perf_counter() - start, 2)})
        return TokenOutput(token_ids=ids, log_probs=logprobs if sampling.logprobs else None, stop_reason=reason)

    def close(self) -> None:
        self.llm.close()


def cmd_llama_main_job(args: argparse.Namespace) -> None:
    """``extensions.rollout``'s main-job command with HFServer.from_pretrained swapped for LlamaServer."""
    from extensions.backends import hf_server
    from extensions.rollout import cli

    servers: list[LlamaServer] = []

    def from_pretrained(path: Any, *, response_length: int, max_model_len: int, **_: Any) -> LlamaServer:
        llm, info = load_llama(args)
        print(json.dumps(info), flush=True)
        servers.append(LlamaServer(llm, response_length, max_model_len))
        return servers[-1]

    hf_server.HFServer.from_pretrained = staticmethod(from_pretrained)  # type: ignore[method-assign]
    start = time.perf_counter()
    rest = args.rollout_args[1:] if args.rollout_args[:1] == ["--"] else args.rollout_args
    code = cli.main(rest)
    print(json.dumps({"exit": code, "rollout_s": round(time.perf_counter() - start, 1), "calls": servers[0].calls}))


# --- table -----------------------------------------------------------------------------------------------


def cmd_table(args: argparse.Namespace) -> None:
    for path in args.files:
        data = json.loads(Path(path).read_text())
        env = data.get("machine", {}).get("env", {})
        avx2 = env.get("ATEN_CPU_CAPABILITY") or "AVX512" not in data.get("llama", {}).get("system_info", "AVX512")
        head = f"{path} ({'emulated AVX2' if avx2 else 'native'}; env {env})"
        if "decode_step_s" in data:
            print(head, "torch:", data["torch_cpu_capability"])
            for key, value in data["decode_step_s"].items():
                print(f"  decode step {key}: {value} s")
            for row in data["profile_batch1_2threads"]:
                print(f"  profile {row['op']}: {row['self_ms']} ms {row.get('pct', '')}%")
        if "replay" in data:
            print(head, data["llama"]["llama_cpp_python"], "load", data["load_s"], "s")
            print("  ", json.dumps(data["replay"]))
        if "problems" in data:
            n = data["n"]
            print(
                f"{head} gsm8k: flexible {data['flexible']:.3f}, strict {data['strict']:.3f} on {n}, {data['seconds']} s"
            )
        if "main_job/after" in data:
            print(head, "HFServer replay:", json.dumps(data["main_job/after"]))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    embedded = sub.add_parser("embedded", help="embedded backend: decode steps per layout and threads, a profile")
    embedded.add_argument("--context", type=int, default=300)
    gemv = sub.add_parser("gemv", help="one-row GEMV of the model's shapes per layout (MKL/oneDNN under this env)")
    gemv.add_argument("--threads", type=int, default=1)
    for name in ("llama-replay", "llama-gsm8k"):
        p = sub.add_parser(name)
        p.add_argument("--gguf", type=Path, default=None, help="default the pack's assembled GGUF")
        p.add_argument("--llama-path", default=None, help="a directory holding another llama_cpp build")
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--n-ctx", type=int, default=4096)
    sub.choices["llama-replay"].add_argument("--trajectories", type=Path, default=FIXTURE)
    gsm = sub.choices["llama-gsm8k"]
    default_gsm8k = os.path.join(os.environ.get("LONGFLOW_GSM8K_DIR", "."), "test.jsonl")
    gsm.add_argument(
        "--gsm8k", default=default_gsm8k, help="GSM8K test .jsonl (default: $LONGFLOW_GSM8K_DIR/test.jsonl)"
    )
    gsm.add_argument("--n", type=int, default=50)
    gsm.add_argument("--max-tokens", type=int, default=256)
    for p in sub.choices.values():
        p.add_argument("--out", type=Path, default=None)
    main_job = sub.add_parser("llama-main-job", help="the main job's rollout on llama.cpp (args after --)")
    main_job.add_argument("--gguf", type=Path, default=None)
    main_job.add_argument("--llama-path", default=None)
    main_job.add_argument("--threads", type=int, default=2)
    main_job.add_argument("--n-ctx", type=int, default=4096)
    main_job.add_argument("rollout_args", nargs=argparse.REMAINDER)
    table = sub.add_parser("table", help="print the figures of saved JSON files")
    table.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    {
        "embedded": cmd_embedded,
        "gemv": cmd_gemv,
        "llama-replay": cmd_llama_replay,
        "llama-gsm8k": cmd_llama_gsm8k,
        "llama-main-job": cmd_llama_main_job,
        "table": cmd_table,
    }[args.cmd](args)


if __name__ == "__main__":
    main()
