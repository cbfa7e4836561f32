"""A folded trajectory through the rollout driver's worker: one record with its earlier segments,
shown by the viewer, and replayed token for token across the fold (verl's real AgentLoopWorker,
the scripted server; ``verl_compat.accept_segment_lists``)."""

from __future__ import annotations

from typing import Any

import pytest

from extensions.rollout.convert import to_record
from extensions.rollout.records import read_jsonl, write_jsonl
from extensions.rollout.replay import generations, replay
from extensions.rollout.summary import summarize
from extensions.rollout.view import render_html
from extensions.verl_compat import segment_list_manager, segment_list_worker_class
from tests.conftest import run_batch, sample, segment_worker
from tests.trainer_harness import tool_call

LONG = " ".join(["alpha"] * 150)
SUMMARY = "<summary>Echoed the text. The answer is 4.</summary>"
SCRIPT = {"FR-fold": [tool_call("echo", text=LONG), SUMMARY, "It is 4.\n#### 4"]}


@pytest.fixture(scope="module")
def fold_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    entry = {
        "name": "fold_rec",
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "tool_parser": "hermes_strict",
        "fold": {"window_tokens": 640, "trigger_fraction": 0.5, "carry_last_observation": False},
    }
    return segment_worker(qwen_dir, tmp_path_factory.mktemp("loops"), [entry])


async def test_a_folded_trajectory_is_one_record_with_its_segments_and_replays_exactly(fold_worker, tmp_path):
    tok = fold_worker.tokenizer
    out = await run_batch(fold_worker, SCRIPT, [sample("FR-fold", "fold_rec")])
    assert len(out) == 1
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    assert segment.fold_trigger == "context" and segment.summary_tokens == len(tok.encode(SUMMARY)) + 1
    assert [t.role for t in segment.turns] == ["assistant", "tool", "user", "assistant"]
    assert record.termination_reason == "final_answer" and [t.role for t in record.turns] == ["assistant"]
    assert tok.decode(segment.response_ids[slice(*segment.turns[-1].span)]).startswith(SUMMARY)
    assert "<summary>\nEchoed the text. The answer is 4.\n</summary>" in tok.decode(record.prompt_ids)
    # the server calls replay in order: the tool call, the summary (segment 0), the answer (segment 1)
    calls = generations(record)
    assert [tok.decode(tokens) for _, tokens, _ in calls] == [
        tool_call("echo", text=LONG) + "<|im_end|>",
        SUMMARY + "<|im_end|>",
        "It is 4.\n#### 4<|im_end|>",
    ]
    assert calls[0][0] == segment.prompt_ids and calls[2][0] == record.prompt_ids

    write_jsonl([record], tmp_path / "t.jsonl")
    (loaded,) = read_jsonl(tmp_path / "t.jsonl")
    assert loaded == record
    problems, _ = await replay([loaded], fold_worker.config, tmp_path / "replay")
    assert problems == []
    drifted = loaded.model_copy(deep=True)
    drifted.segments[0].response_mask[3] ^= 1
    problems, _ = await replay([drifted], fold_worker.config, tmp_path / "replay2")
    n = len(drifted.segments[0].response_mask)
    assert problems == [f"trajectory 0: segment 0 response_mask differs at position 3 (lengths {n} vs {n})"]

    # the run summary counts the whole trajectory: the segment's call and tokens too, not the fold's turns
    summary = summarize([record], 1.0)
    assert (summary["mean_assistant_turns"], summary["mean_tool_calls"], summary["mean_user_turns"]) == (2, 1, 0)
    assert summary["mean_segments"] == 2
    assert summary["generated_tokens"] == sum(segment.response_mask) + sum(record.response_mask)
    assert summary["response_tokens"] == len(segment.response_ids) + len(record.response_ids)
    assert [(t.fold, t.summary) for t in segment.turns] == [
        (False, False),
        (False, False),
        (True, False),
        (False, True),
    ]

    page = render_html([record], tokenizer=tok)
    assert "5 turns in 2 segments (context folded 1 time)" in page
    assert "segment 2 of 2 starts from the task and the summary" in page
    assert 'data-turn="s0-3"' in page and '"s0-3"' in page.split('id="tok-0"')[1]


async def test_the_ray_workers_class_of_the_drivers_gpu_backends_takes_segments_too(fold_worker):
    """``segment_list_manager()`` (the vLLM/SGLang backends) runs workers of ``segment_list_worker_class()``:
    built here in-process, it turns the folding loop's list into the same record."""
    from verl.experimental.agent_loop import AgentLoopManager

    worker = segment_list_worker_class()(fold_worker.config, llm_client=None)
    out = await run_batch(worker, SCRIPT, [sample("FR-fold", "fold_rec")])
    record = to_record(out, 0, worker.tokenizer)
    (segment,) = record.segments
    assert segment.fold_trigger == "context" and record.termination_reason == "final_answer"
    assert [t.role for t in segment.turns] == ["assistant", "tool", "user", "assistant"]
    manager = segment_list_manager()
    assert issubclass(manager, AgentLoopManager)
    assert manager.agent_loop_workers_class.__ray_metadata__.modified_class.__mro__[1] is segment_list_worker_class()
    # verl's __init__ keeps a subclass's workers class (it only sets its own when there is none)
    kept = manager(fold_worker.config, llm_client=None).agent_loop_workers_class
    assert kept is manager.agent_loop_workers_class
