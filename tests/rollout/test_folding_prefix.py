"""The fold's ``summary_prefix``: the loop opens the reply to the fold request (mask 0), the policy's tokens
after it are the trained summary, the next segment carries it, and the trajectory replays token for token
(verl's real AgentLoopWorker, the scripted server)."""

from __future__ import annotations

from typing import Any

import pytest

from extensions.folding import carry_message, parse_fold_settings
from extensions.rollout.convert import to_record
from extensions.rollout.replay import generations, replay
from extensions.verl_compat import accept_segment_lists
from tests.conftest import FIXTURES, build_worker, run_batch, sample, segment_worker
from tests.trainer_harness import tool_call

LONG = " ".join(["alpha"] * 150)
PREFIX = "<summary>\n"
REPLY = "Echoed the text once; next: answer 4.</summary>"
SCRIPT = {"FP-fold": [tool_call("echo", text=LONG), REPLY, "It is 4.\n#### 4"]}


@pytest.fixture(scope="module")
def prefix_worker(qwen_dir: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    fold = {"window_tokens": 640, "trigger_fraction": 0.5, "carry_last_observation": False, "summary_prefix": PREFIX}
    entry = {
        "name": "fold_prefix",
        "_target_": "extensions.folding_loop.FoldingWorkflowAgent",
        "tool_parser": "hermes_strict",
        "fold": fold,
    }
    return segment_worker(qwen_dir, tmp_path_factory.mktemp("loops"), [entry])


async def test_the_prefix_opens_the_summary_untrained_and_the_summary_is_carried(prefix_worker, tmp_path):
    tok = prefix_worker.tokenizer
    out = await run_batch(prefix_worker, SCRIPT, [sample("FP-fold", "fold_prefix")])
    record = to_record(out, 0, tok)
    (segment,) = record.segments
    request, summary = segment.turns[-2:]
    assert (request.fold, summary.summary, summary.summary_tagged) == (True, True, True)
    # the request turn ends with the assistant turn's opening and the prefix, all context (mask 0)
    lo, hi = request.span
    prefix_ids = tok.encode(PREFIX, add_special_tokens=False)
    assert segment.response_ids[hi - len(prefix_ids) : hi] == prefix_ids
    assert tok.decode(segment.response_ids[lo:hi]).endswith("<|im_start|>assistant\n" + PREFIX)
    assert segment.response_mask[lo:hi] == [0] * (hi - lo)
    # the summary turn is the policy's reply alone, every token trained
    assert summary.span[0] == hi and tok.decode(segment.response_ids[slice(*summary.span)]) == REPLY + "<|im_end|>"
    assert segment.response_mask[slice(*summary.span)] == [1] * (summary.span[1] - summary.span[0])
    assert segment.summary_tokens == len(tok.encode(REPLY)) + 1
    carried = carry_message("Echoed the text once; next: answer 4.", None)["content"]
    assert carried in tok.decode(record.prompt_ids)
    # the server was asked for the reply only, right after the prefix; replay rebuilds every token
    calls = generations(record)
    assert tok.decode(calls[1][1]) == REPLY + "<|im_end|>" and calls[1][0][-len(prefix_ids) :] == prefix_ids
    problems, _ = await replay([record], prefix_worker.config, tmp_path / "replay")
    assert problems == []


def test_the_prefix_counts_in_the_folds_reserve(qwen_dir, monkeypatch):
    """A summary cap that just leaves a turn's room fits without the prefix and is a config error with it."""
    import asyncio

    from hydra.errors import InstantiationException

    from extensions.folding_loop import FRAMING, MIN_TURN_TOKENS, template_tokens
    from extensions.verl_compat import agent_loop_registry
    from tests.conftest import PACK_LOOPS, RESPONSE_LENGTH, make_batch

    worker = accept_segment_lists(
        build_worker(qwen_dir, tools=FIXTURES / "tools.yaml", agent_loops=PACK_LOOPS, tool_format="hermes")
    )
    tok = worker.tokenizer
    instruction = template_tokens(tok, parse_fold_settings(None, entry="x").instruction).instruction_tokens
    cap = RESPONSE_LENGTH - instruction - FRAMING - MIN_TURN_TOKENS  # exactly a turn's room left
    prefix = len(tok.encode(PREFIX, add_special_tokens=False))
    registry = agent_loop_registry()
    for name, fold in (
        ("fits", {"summary_max_tokens": cap}),
        ("over", {"summary_max_tokens": cap, "summary_prefix": PREFIX}),
    ):
        entry = {"_target_": "extensions.folding_loop.FoldingWorkflowAgent", "name": name, "fold": fold}
        monkeypatch.setitem(registry, name, entry)
    message = (
        rf"agent loop 'over': fold: the fold reserves {instruction + FRAMING + prefix + cap} response tokens "
        rf"\(instruction {instruction} \+ {FRAMING} \+ summary_prefix {prefix} \+ summary_max_tokens {cap}\)"
    )
    with pytest.raises(InstantiationException, match=message):
        asyncio.run(worker.generate_sequences(make_batch([sample("X", "over")])))
    out = asyncio.run(run_batch(worker, {"Y": ["#### 4"]}, [sample("Y", "fits")]))
    assert out.non_tensor_batch["extras"][0]["termination_reason"] == "final_answer"
