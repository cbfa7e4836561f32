"""The warm start: the flagged-ledger demonstrator, the demo backend through verl's real AgentLoopWorker and the
rollout driver, and supervised fine-tuning on the recorded tokens (a tiny random Qwen2 on the real tokenizer)."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from extensions.backends.demo_server import DemoServer, load_policy
from extensions.data import ledger
from extensions.errors import ConfigError
from extensions.rollout import cli
from extensions.rollout.records import SegmentRecord, TrajectoryRecord, read_jsonl
from extensions.warm_start import sft
from extensions.warm_start.ledger_demo import flagged_ledger, reading, summary, tool_call

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = str(ROOT / "experiments" / "ledger_folding")
FLAGGED = ["--pages", "12", "--per-page", "4", "--accounts", "6", "--question", "lookup", "--ref-style", "flag",
           "--answer-tool", "--footer", "submit"]  # fmt: skip
WINDOW = ["data.max_prompt_length=800", "data.max_response_length=1248", "actor_rollout_ref.rollout.prompt_length=800",
          "actor_rollout_ref.rollout.response_length=1248"]  # fmt: skip
PAGE_3 = (
    "Ledger page 3 of 12\nID | Day | Account | Type | Amount | Memo\n"
    "T00009 | day 1 | ACC-1 | deposit | 13 | rent 1 Contoso ref 1\n"
    "T00010 | day 2 | ACC-2 | withdrawal | 283 | rent 2 Contoso ref 2{flag}\n"
    "End of page 3 of 12. If the DISPUTED transaction is on this page, call submit_answer with its amount; if not, "
    "call read_page with page 4."
)
OPEN = "<|im_start|>assistant\n"


def context(*messages: str, opening: str = "") -> str:
    return "".join(f"<|im_start|>user\n{m}<|im_end|>\n" for m in messages) + OPEN + opening


def test_the_demonstrator_reads_on_submits_the_flagged_amount_and_summarizes_where_it_is() -> None:
    assert flagged_ledger(context("What is the amount?")) == tool_call("read_page", page=1)
    assert (
        tool_call("read_page", page=1) == '<tool_call>\n{"name": "read_page", "arguments": {"page": 1}}\n</tool_call>'
    )
    page = PAGE_3.format(flag="")
    assert flagged_ledger(context("task", f"<tool_response>\n{page}\n</tool_response>")) == tool_call(
        "read_page", page=4
    )
    flagged = PAGE_3.format(flag=" | DISPUTED")
    assert reading(flagged) == (3, 12, 283)
    assert flagged_ledger(context("task", flagged)) == tool_call("submit_answer", answer=283)
    # asked to fold, after the loop's opening: the rest of the summary, closed
    fold = context("task", page, "Your context is almost full...", opening="<summary>\nPages read so far: 1 to")
    assert flagged_ledger(fold) == " 3.\nNext page to read: 4.\n</summary>"
    assert flagged_ledger(context("task", flagged, "fold", opening="<summary>\n")) == (
        "Pages read so far: 1 to 3.\nFound the DISPUTED transaction on page 3: its amount is 283.\n</summary>"
    )
    assert summary(12, 12, None) == "Pages read so far: 1 to 12.\nPage 12 was the last page.\n</summary>"
    # no page in the context (a carried page cut away): the summary says where the reading stands
    assert flagged_ledger(context("<summary>\nPages read so far: 1 to 7.\n</summary>\nContinue.")) == tool_call(
        "read_page", page=8
    )


async def test_the_demo_server_answers_like_an_engine(tokenizer: Any) -> None:
    server = DemoServer(tokenizer, lambda text: "read page 2" if text.endswith(OPEN) else "?")
    prompt = tokenizer.encode(context("hi"), add_special_tokens=False)
    out = await server.generate("r1", prompt_ids=prompt, sampling_params={"logprobs": True})
    assert out.token_ids == [*tokenizer.encode("read page 2", add_special_tokens=False), tokenizer.eos_token_id]
    assert out.log_probs == [0.0] * len(out.token_ids) and out.stop_reason == "completed"
    cut = await server.generate("r2", prompt_ids=prompt, sampling_params={"max_tokens": 2})
    assert cut.token_ids == out.token_ids[:2] and cut.stop_reason == "length" and cut.log_probs is None
    # a stop string ends the reply with the token that completes it, as the scripted test server's do
    fenced = await server.generate("r3", prompt_ids=prompt, sampling_params={"stop": ["page"]})
    assert tokenizer.decode(fenced.token_ids) == "read page" and fenced.stop_reason == "completed"


def test_a_bad_demo_policy_is_a_config_error() -> None:
    assert load_policy("extensions.warm_start.ledger_demo:flagged_ledger") is flagged_ledger
    with pytest.raises(ConfigError, match=r"^--demo-policy 'flagged_ledger': expected module:function, e\.g\. "):
        load_policy("flagged_ledger")
    with pytest.raises(ConfigError, match=r"^--demo-policy 'nosuch\.mod:f': cannot import 'nosuch\.mod': "):
        load_policy("nosuch.mod:f")
    with pytest.raises(ConfigError, match=r"^--demo-policy 'extensions\.warm_start\.ledger_demo:nope': "):
        load_policy("extensions.warm_start.ledger_demo:nope")


@pytest.fixture(scope="module")
def demos(qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four flagged 12-page ledgers played by the demonstrator through folding_flagged (the rollout driver)."""
    tmp = tmp_path_factory.mktemp("demos")
    ledger.main(["--output-dir", str(tmp / "data"), "--split", "train", "--seed", "1", "--count", "4",
                 "--agent-name", "folding_flagged", *FLAGGED])  # fmt: skip
    code = cli.main([EXPERIMENT, "--backend", "demo", "--data", str(tmp / "data" / "train.parquet"), "--out",
                     str(tmp / "out"), "--no-html", f"actor_rollout_ref.model.path={qwen_dir}", *WINDOW])  # fmt: skip
    assert code == 0
    return tmp


def test_demonstrations_through_the_driver_fold_and_answer_right(demos: Path, tokenizer: Any) -> None:
    records = read_jsonl(demos / "out" / "trajectories.jsonl")
    truth = pd.read_parquet(demos / "data" / "train.parquet")["reward_model"].map(lambda r: r["ground_truth"])
    assert [r.reward for r in records] == [1.0] * 4 and [r.ground_truth for r in records] == truth.tolist()
    assert [r.termination_reason for r in records] == ["final_answer"] * 4
    needle = pd.read_parquet(demos / "data" / "train.parquet")["extra_info"].map(lambda e: e["needle_page"])
    # three to four 270-token pages fit a 2K segment: the later the flag, the more folds
    assert needle.tolist() == [1, 10, 6, 1] and [len(r.segments) for r in records] == [0, 2, 1, 0]
    summary_json = json.loads((demos / "out" / "summary.json").read_text())
    assert summary_json["backend"] == "demo" and summary_json["accuracy"] == 1.0
    for record in records:
        pages = 0
        for segment in record.segments:
            text = tokenizer.decode(segment.response_ids)
            pages += text.count('"name": "read_page"')
            # each fold's summary names the last page read and the next one, and is closed
            assert text.endswith(f" {pages}.\nNext page to read: {pages + 1}.\n</summary><|im_end|>")
            assert len(segment.prompt_ids) + len(segment.response_ids) <= 2048
        final = tokenizer.decode(record.response_ids)
        assert final.endswith(tool_call("submit_answer", answer=int(record.ground_truth)) + "<|im_end|>")


def test_the_driver_refuses_a_demo_policy_for_another_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([EXPERIMENT, "--backend", "hf", "--demo-policy", "a:b"]) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "error: --demo-policy is for --backend demo; --backend is hf"
    )
    assert cli.main([EXPERIMENT, "--backend", "demo", "--demo-policy", "a"]) == 2
    assert "error: --demo-policy 'a': expected module:function" in capsys.readouterr().err


def record(reward: float | None, parts: list[tuple[list[int], list[int], list[int]]]) -> TrajectoryRecord:
    *earlier, (prompt, response, mask) = parts
    segments = [SegmentRecord(prompt_ids=p, response_ids=r, response_mask=m, turns=[]) for p, r, m in earlier]
    return TrajectoryRecord(index=0, agent_name="x", raw_prompt=[], turns=[], prompt_ids=prompt, response_ids=response,
                            response_mask=mask, termination_reason="final_answer", reward=reward, segments=segments)  # fmt: skip


def test_sft_rows_label_exactly_the_trained_tokens_of_every_segment() -> None:
    kept = record(1.0, [([1, 2], [3, 4, 5], [1, 0, 1]), ([6], [7, 8], [1, 1])])
    no_trained = record(1.0, [([1], [2], [0])])
    rows, left_out = sft.examples([kept, record(0.0, [([9], [9], [1])]), record(None, [([9], [9], [1])]), no_trained],
                                  min_reward=1.0)  # fmt: skip
    assert left_out == 2
    assert rows == [sft.Example([1, 2, 3, 4, 5], [-100, -100, 3, -100, 5]), sft.Example([6, 7, 8], [-100, 7, 8])]
    assert len(sft.examples([record(0.0, [([9], [9], [1])])], min_reward=None)[0]) == 1
    batches = sft.steps([sft.Example([0] * n, [1] * n) for n in (5, 1, 4, 2, 3)], 3, 8, random.Random(0))
    # shuffled, sorted inside a step, cut where the next row would pad the micro-batch past 8 tokens
    assert [[[len(r.input_ids) for r in micro] for micro in step] for step in batches] == [[[1, 4], [5]], [[2, 3]]]


@pytest.fixture(scope="module")
def tiny_model(qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialized two-layer Qwen2 on the real tokenizer, with the files an embedded model folder has."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    out = tmp_path_factory.mktemp("tiny")
    for path in qwen_dir.iterdir():
        shutil.copy2(path, out / path.name)
    (out / "longflow_embedded.json").write_text("{}")
    tok = AutoTokenizer.from_pretrained(qwen_dir)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=tok.pad_token_id)  # fmt: skip
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(out)  # bf16 weights, as the GPU's embedded model
    return out


def test_sft_on_demonstrations_lowers_the_loss_and_writes_a_loadable_model(
    demos: Path, tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    out = tmp_path / "sft"
    code = sft.main(["--records", str(demos / "out" / "trajectories.jsonl"), "--model", str(tiny_model), "--out",
                     str(out), "--epochs", "3", "--lr", "3e-3", "--batch-size", "2", "--micro-tokens", "8192"])  # fmt: skip
    assert code == 0
    with (out / "sft_steps.csv").open() as f:
        rows = list(csv.DictReader(f))
    records = read_jsonl(demos / "out" / "trajectories.jsonl")
    segments = sum(len(r.segments) + 1 for r in records)
    assert len(rows) == 3 * -(-segments // 2)
    assert sum(int(r["rows"]) for r in rows) == 3 * segments
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"]) - 1.0
    summary_json = json.loads((out / "sft_summary.json").read_text())
    assert summary_json["rows"] == segments and summary_json["left_out"] == 0 and summary_json["device"] == "cpu"
    names = {p.name for p in out.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"} <= names
    assert "longflow_embedded.json" not in names  # the base weights' provenance is not these weights'
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"  # the source's, though trained in fp32
    from safetensors import safe_open

    with safe_open(out / "model.safetensors", "pt") as weights:
        names = weights.keys()  # a safetensors handle, not a dict
        assert {str(weights.get_tensor(k).dtype) for k in names} == {"torch.bfloat16"}
    AutoModelForCausalLM.from_pretrained(out)


def test_sft_without_kept_trajectories_exits_2(tiny_model: Path, tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(record(0.0, [([1], [2], [1])]).model_dump_json(by_alias=True) + "\n")
    assert sft.main(["--records", str(path), "--model", str(tiny_model), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"error: --records {path}: no trajectory with a trained token was kept"


def test_the_committed_fine_tuning_figures_agree() -> None:
    """docs/results/ledger-warm-start-h200/sft: the per-step CSV (what scripts/plot_sft.py draws) and the summary."""
    from tests.scripts import load_script

    folder = ROOT / "docs" / "results" / "ledger-warm-start-h200" / "sft"
    rows = load_script("plot_sft").read_steps(folder / "sft_steps.csv")
    summary_json = json.loads((folder / "sft_summary.json").read_text())
    assert len(rows) == summary_json["steps"] == 81 and rows[-1]["epoch"] == summary_json["epochs"] == 3
    assert round(rows[0]["loss"], 4) == round(summary_json["first_loss"], 4) == 2.0562
    assert round(rows[-1]["loss"], 4) == round(summary_json["last_loss"], 4) == 0.0024
    assert sum(r["rows"] for r in rows) == 3 * summary_json["rows"] == 3 * 851


def test_the_demo_backend_needs_a_policy() -> None:
    from extensions.rollout import backends

    config, _ = cli.compose_experiment(EXPERIMENT, [])
    with pytest.raises(ConfigError, match=r"^--backend demo needs a demonstrator: demo_policy "):
        backends.make_backend("demo", config)
