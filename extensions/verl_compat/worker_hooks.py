"""The in-process AgentLoopWorker of the rollout driver: a loop that returns a LIST of outputs.

verl 0.9.1's v1 trainer takes a list (one training row per output: a folded trajectory's segments);
the legacy ``AgentLoopWorker._agent_loop_postprocess``, which the rollout driver runs, takes one
output. ``accept_segment_lists(worker)`` lets that worker take a list: the last output becomes the
row, and the earlier ones ride along in its ``extra_fields["segments"]`` (prompt, response, mask,
log-probs and extras of each), so the driver records, shows and replays every segment. Only the
worker given is changed (the driver's); a trainer's workers are not: there a list must reach verl's
v1 postprocessing, never be folded into one row.
"""

from __future__ import annotations

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


def accept_segment_lists(worker: Any) -> Any:
    """Make this AgentLoopWorker instance take a loop's list of outputs (module docstring); returns it."""
    original = worker._agent_loop_postprocess

    async def postprocess(self: Any, output: Any, validate: bool, **kwargs: Any) -> Any:
        if isinstance(output, list):
            *earlier, output = output
            output.extra_fields["segments"] = [segment_payload(o) for o in earlier]
        return await original(output, validate, **kwargs)

    worker._agent_loop_postprocess = types.MethodType(postprocess, worker)
    return worker
