"""Partial rollouts (v1 ``colocate_async``): a turn interrupted by a weight update resumes in the same context.

verl's own ``FullyAsyncLLMServerClient`` runs its resume loop over a scripted engine that aborts chosen replies
after a few tokens and then serves the next weight version (``extensions/testing/aborting_client.py``); verl's
real ``AgentLoopWorker`` runs ``long_workflow`` on it. The trajectory must be token for token the one an
uninterrupted server gives (tokens, mask, merged log-probs), its tool must run once, and each assistant turn
must record the weight versions that produced it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import yaml

from extensions.metrics import longflow_metrics
from extensions.segment_weights import segment_weights
from extensions.testing.aborting_client import AbortingClient
from extensions.testing.scripted_server import ScriptedServer, fake_logprob
from tests.conftest import FIXTURES, Row, make_batch, run_batch, sample, segment_worker
from tests.fixtures import tools as tracked
from tests.trainer_harness import tool_call

SCRIPT = {"Q-resume": [tool_call("echo", text="hi"), "Done: 4"]}


async def test_an_interrupted_turn_resumes_token_for_token(worker) -> None:
    reference = Row(await run_batch(worker, SCRIPT, [sample("Q-resume", "long_workflow")]), 0)
    tracked.reset()
    client = AbortingClient(
        config=SimpleNamespace(), server=ScriptedServer(worker.tokenizer, SCRIPT), abort_after={0: 5}, version=3
    )
    worker.llm_client = client
    out = await worker.generate_sequences(make_batch([sample("Q-resume", "long_workflow")]))
    row = Row(out, 0)

    # the first reply was cut after 5 tokens at version 3 and resubmitted with them; the rest came at version 4
    assert [(a["version"], a["prompt_len"] - client.attempts[0]["prompt_len"]) for a in client.attempts] == [
        (3, 0),
        (4, 5),
        (4, row.extras["turns"][2]["span"][0]),  # the second turn: the whole stream so far, at version 4
    ]
    assert row.response_ids == reference.response_ids
    assert row.mask == reference.mask
    assert row.logprobs == reference.logprobs
    assert row.logprobs[:3] == pytest.approx([fake_logprob(t) for t in row.response_ids[:3]])  # float32 column
    assert [e[:2] for e in tracked.LIFECYCLE if e[0] == "execute"] == [("execute", "echo")]  # parsed once, ran once
    turns = row.extras["turns"]
    assert [(t["role"], t.get("policy_versions")) for t in turns] == [
        ("assistant", [3, 4]),
        ("tool", None),
        ("assistant", [4, 4]),
    ]
    assert (out.non_tensor_batch["min_global_steps"][0], out.non_tensor_batch["max_global_steps"][0]) == (3, 4)
    metrics = longflow_metrics([row.extras])
    assert metrics["longflow/policy_versions/mixed_turns"] == 0.5
    assert metrics["longflow/policy_versions/turn_span_max"] == 1.0


async def test_an_uninterrupted_run_records_one_version_a_turn(worker) -> None:
    client = AbortingClient(
        config=SimpleNamespace(), server=ScriptedServer(worker.tokenizer, SCRIPT), abort_after={}, version=7
    )
    worker.llm_client = client
    row = Row(await worker.generate_sequences(make_batch([sample("Q-resume", "long_workflow")])), 0)
    assert [t.get("policy_versions") for t in row.extras["turns"]] == [[7, 7], None, [7, 7]]
    assert longflow_metrics([row.extras])["longflow/policy_versions/mixed_turns"] == 0.0


@pytest.fixture(scope="module")
def fold_worker(qwen_dir, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("fold")
    tools = yaml.safe_load((FIXTURES / "tools.yaml").read_text())
    tools["tools"].append({"class_name": "extensions.tools.fold.FoldTool", "config": {"type": "native"}})
    (tmp / "tools.yaml").write_text(yaml.safe_dump(tools))
    fold = {"window_tokens": 100_000, "max_segments": 2, "summary_max_tokens": 48}
    entry = {
        "name": "fold_resume",
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "reserve_final_tokens": 64,
        "fold": fold,
        "tool_parser": "hermes_strict",
        "interaction_config_path": None,
    }
    return segment_worker(qwen_dir, tmp, [entry], tools=tmp / "tools.yaml")


async def test_a_fold_summary_interrupted_by_a_weight_update_keeps_its_segments_and_weights(fold_worker) -> None:
    """The rollout driver's worker carries the earlier segment in the last row's ``segments`` (v1 makes it a row)."""
    script = {"FR": [tool_call("fold"), "<summary>Nothing yet.</summary>", "#### 4"]}
    reference = await run_batch(fold_worker, script, [sample("FR", "fold_resume")])
    fold_worker.llm_client = AbortingClient(  # the summary (reply 1) is cut after 3 tokens at version 5
        config=SimpleNamespace(), server=ScriptedServer(fold_worker.tokenizer, script), abort_after={1: 3}, version=5
    )
    out = await fold_worker.generate_sequences(make_batch([sample("FR", "fold_resume")]))
    for key in ("responses", "response_mask", "rollout_log_probs", "prompts"):
        assert torch.equal(out.batch[key], reference.batch[key]), key
    (earlier,) = out.non_tensor_batch["segments"][0]
    assert earlier == reference.non_tensor_batch["segments"][0][0] | {"extras": earlier["extras"]}
    rows = [earlier["extras"], out.non_tensor_batch["extras"][0]]
    versions = [[(t["role"], t.get("policy_versions")) for t in row["turns"]] for row in rows]
    assert versions == [
        [("assistant", [5, 5]), ("user", None), ("assistant", [5, 6])],  # the fold call, the request, the summary
        [("assistant", [6, 6])],
    ]
    assert [row["num_segments"] for row in rows] == [2, 2]
    assert segment_weights(rows, "inverse_count").tolist() == [0.5, 0.5]
