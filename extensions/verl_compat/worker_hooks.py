"""The rollout driver's AgentLoopWorkers: a loop that returns a LIST of outputs.

verl 0.9.1's v1 trainer takes a list (one training row per output: a folded trajectory's segments);
the legacy ``AgentLoopWorker._agent_loop_postprocess``, which the rollout driver runs, takes one
output. ``accept_segment_lists(worker)`` lets an in-process worker take a list: the last output
becomes the row, and the earlier ones ride along in its ``extra_fields["segments"]`` (prompt,
response, mask, log-probs and extras of each), so the driver records, shows and replays every
segment. ``segment_list_manager()`` is verl's ``AgentLoopManager`` whose Ray workers do the same (the
driver's vLLM/SGLang backends). Only the driver's workers are changed; a trainer's are not: there a
list must reach verl's v1 postprocessing, never be folded into one row.
"""

from __future__ import annotations

import functools
import types
from typing import Any


def segment_payload(output: Any) -> dict[str, Any]:
    """What the record needs of one earlier segment."""
    return {
        "prompt_ids": list(output.prompt_ids),
        "response_ids": list(output.response_ids),
        "response_mask": list(output.response_mask),
        "response_logprobs": None if output.response_logprobs is None else list(output.response_logprobs),
        "extras": output.extra_fields.get("extras"),
    }


def last_with_segments(output: Any) -> Any:
    """A list of outputs as its last one, the earlier ones in ``extra_fields["segments"]``; one output as it is."""
    if isinstance(output, list):
        *earlier, output = output
        output.extra_fields["segments"] = [segment_payload(o) for o in earlier]
    return output


def accept_segment_lists(worker: Any) -> Any:
    """Make this AgentLoopWorker instance take a loop's list of outputs (module docstring); returns it."""
    original = worker._agent_loop_postprocess

    async def postprocess(self: Any, output: Any, validate: bool, **kwargs: Any) -> Any:
        return await original(last_with_segments(output), validate, **kwargs)

    worker._agent_loop_postprocess = types.MethodType(postprocess, worker)
    return worker


@functools.cache
def segment_list_worker_class() -> type:
    """verl's AgentLoopWorker taking a loop's list of outputs, as a class (for Ray actors)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    class SegmentListAgentLoopWorker(AgentLoopWorker):
        async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> Any:
            return await super()._agent_loop_postprocess(last_with_segments(output), validate, **kwargs)

    return SegmentListAgentLoopWorker


@functools.cache
def segment_list_manager() -> type:
    """verl's AgentLoopManager whose Ray workers take a loop's list of outputs (its ``agent_loop_workers_class``
    hook, read in ``AgentLoopManager.__init__``)."""
    import ray
    from verl.experimental.agent_loop import AgentLoopManager

    class SegmentListAgentLoopManager(AgentLoopManager):
        agent_loop_workers_class = ray.remote(segment_list_worker_class())

    return SegmentListAgentLoopManager
