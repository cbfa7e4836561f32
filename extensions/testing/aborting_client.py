"""verl's partial-rollout client over a scripted engine that aborts chosen replies, for CPU tests.

Under v1 ``colocate_async`` the trainer aborts every in-flight request when it takes its batch, updates the
weights and resumes; ``FullyAsyncLLMServerClient.generate`` (``verl/workers/rollout/llm_server.py``) then resubmits each aborted
request with the tokens generated so far, merges tokens and log-probs, and reports the first and last weight
version it saw (``min_global_steps`` / ``max_global_steps``). ``AbortingClient`` is that class, unchanged: only the
one server attempt it calls (``LLMServerClient.generate``) is replaced by ``ScriptedEngine``, which answers from a
``ScriptedServer`` and, on the attempts listed in ``abort_after``, returns only the first tokens with
``stop_reason="aborted"`` and then moves to the next weight version, as a real abort and weight update do.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient, LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from extensions.testing.scripted_server import ScriptedServer


class ScriptedEngine(LLMServerClient):
    """One server attempt: a scripted reply, cut short on the replies numbered in ``abort_after``."""

    def __init__(
        self,
        *,
        server: ScriptedServer,
        abort_after: dict[int, int],
        version: int,
        config: Any = None,
        **kwargs: Any,
    ):  # no super().__init__: that one connects to Ray's load balancer
        self.config = config if config is not None else SimpleNamespace()
        self.server = server
        self.abort_after = dict(abort_after)
        """Reply number (0-based, in arrival order) -> tokens it returns before it is aborted."""
        self.version = version
        self.replies = 0
        self.attempts: list[dict[str, Any]] = []
        self._pending: dict[str, tuple[list[int], TokenOutput]] = {}  # request id -> (context so far, rest)

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs):
        self.attempts.append({"request_id": request_id, "prompt_len": len(prompt_ids), "version": self.version})
        if request_id in self._pending:  # the client's resubmission: the same context plus what was generated
            context, rest = self._pending.pop(request_id)
            if list(prompt_ids) != context:
                raise AssertionError(f"{request_id}: resumed on another context than the aborted reply's")
            return self._at_version(rest)
        full = await self.server.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        number, self.replies = self.replies, self.replies + 1
        keep = self.abort_after.get(number)
        if keep is None or keep >= len(full.token_ids):
            return self._at_version(full)
        head = TokenOutput(
            token_ids=full.token_ids[:keep],
            log_probs=full.log_probs[:keep] if full.log_probs is not None else None,
            stop_reason="aborted",
            num_preempted=0,
        )
        rest = TokenOutput(
            token_ids=full.token_ids[keep:],
            log_probs=full.log_probs[keep:] if full.log_probs is not None else None,
            stop_reason=full.stop_reason,
            num_preempted=0,
        )
        self._pending[request_id] = (list(prompt_ids) + head.token_ids, rest)
        head = self._at_version(head)
        self.version += 1  # the trainer updates the weights before generation resumes
        return head

    def _at_version(self, output: TokenOutput) -> TokenOutput:
        output.extra_fields = {"global_steps": self.version}
        return output


class AbortingClient(FullyAsyncLLMServerClient, ScriptedEngine):
    """verl's ``FullyAsyncLLMServerClient`` whose server attempts are ``ScriptedEngine``'s (see the module)."""
