"""A scripted stand-in for verl's LLM server client, for CPU tests and benchmarks.

It implements the same coroutine as ``verl.workers.rollout.llm_server.LLMServerClient``:
``generate(request_id, *, prompt_ids, sampling_params, ...) -> TokenOutput``. Like vLLM it
returns token ids that end with the EOS token (or a stop token), honours ``max_tokens``
(cutting the reply, with no EOS, as a length stop does), ``stop_token_ids`` and ``stop``
strings (the reply ends with the token whose text completes the first stop string, as vLLM's
token ids do; the rest of the scripted reply is never generated), and returns one log-prob
per token when ``sampling_params["logprobs"]`` is set.

A script maps a marker string that appears in a sample's prompt to that sample's replies,
one per assistant turn. Replies are text (tokenised with the real tokenizer), raw token
id lists, or ``ServerFault`` to make that call raise.

Several trajectories of one prompt (verl's ``rollout.n`` sessions share the prompt): map the
marker to ``Alternatives(script_a, script_b, ...)``. Each new request id whose prompt carries
the marker takes the next script, in the order of their first requests, cycling; later
turns of that request id continue the same script. Sessions reach the server in no fixed
order (verl tokenizes prompts in a thread pool), so tests tell the trajectories apart by
their content, not by session id.

``global_steps`` (an int) is reported on every reply as verl's rollout server reports the
weight version (``extra_fields`` ``global_steps``, ``min_global_steps``, ``max_global_steps``,
see ``verl/workers/rollout/llm_server.py``); without it they are None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from extensions.backends.demo_server import engine_cut


@dataclass(frozen=True)
class ServerFault:
    """Make the server raise ``RuntimeError(message)`` for this turn."""

    message: str = "injected server error"


Reply = str | list[int] | ServerFault


@dataclass(frozen=True, init=False)
class Alternatives:
    """Several scripts for one marker, handed out to successive new request ids (cycling)."""

    scripts: tuple[tuple[Reply, ...], ...]

    def __init__(self, *scripts: Sequence[Reply]):
        if not scripts:
            raise ValueError("Alternatives needs at least one script")
        object.__setattr__(self, "scripts", tuple(tuple(s) for s in scripts))


Script = Sequence[Reply] | Alternatives


def fake_logprob(token_id: int) -> float:
    """Deterministic, token-dependent log-prob so tests can assert alignment."""
    return -((token_id % 97) + 1) / 100.0


class ScriptedServer:
    """Replays scripted assistant turns per sample."""

    def __init__(
        self,
        tokenizer: Any,
        script: dict[str, Script],
        *,
        latency_s: float = 0.0,
        global_steps: int | None = None,
    ):
        self.tokenizer = tokenizer
        self.script = {
            marker: replies.scripts if isinstance(replies, Alternatives) else (tuple(replies),)
            for marker, replies in script.items()
        }
        self.latency_s = latency_s
        self.global_steps = global_steps
        self.eos_id: int = tokenizer.eos_token_id
        self._by_request: dict[str, tuple[str, int, int]] = {}  # request id -> (marker, alternative, turn)
        self._started: dict[str, int] = {}  # marker -> request ids started so far
        self._encoded: dict[str, list[int]] = {}
        self.calls: list[dict[str, Any]] = []

    def _marker_for(self, prompt_ids: list[int]) -> str:
        text = self.tokenizer.decode(prompt_ids)
        found = [m for m in self.script if m in text]
        if len(found) != 1:
            raise KeyError(f"expected exactly one script marker in the prompt, found {found}: {text[-300:]!r}")
        return found[0]

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        **kwargs: Any,
    ) -> TokenOutput:
        if request_id in self._by_request:
            marker, alternative, turn = self._by_request[request_id]
        else:
            marker, turn = self._marker_for(prompt_ids), 0
            alternative = self._started.get(marker, 0) % len(self.script[marker])
            self._started[marker] = self._started.get(marker, 0) + 1
        self._by_request[request_id] = (marker, alternative, turn + 1)
        call = {"marker": marker, "turn": turn, "prompt_len": len(prompt_ids), **sampling_params}
        if len(self.script[marker]) > 1:
            call["alternative"] = alternative
        self.calls.append(call)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        replies = self.script[marker][alternative]
        if turn >= len(replies):
            raise IndexError(f"script {marker!r} has {len(replies)} replies; turn {turn} was requested")
        reply = replies[turn]
        if isinstance(reply, ServerFault):
            raise RuntimeError(reply.message)
        ids = self._tokens(reply)
        ids, stopped = engine_cut(self.tokenizer, ids, sampling_params)
        log_probs = [fake_logprob(t) for t in ids] if sampling_params.get("logprobs") else None
        return TokenOutput(
            token_ids=ids,
            log_probs=log_probs,
            stop_reason="completed" if stopped else "length",
            num_preempted=0,
            extra_fields=self._version_fields(),
        )

    def _version_fields(self) -> dict[str, int | None]:
        fields = {"min_global_steps": self.global_steps, "max_global_steps": self.global_steps}
        return fields if self.global_steps is None else {"global_steps": self.global_steps, **fields}

    def _tokens(self, reply: str | list[int]) -> list[int]:
        if isinstance(reply, list):
            return list(reply)
        if reply not in self._encoded:
            self._encoded[reply] = self.tokenizer.encode(reply, add_special_tokens=False) + [self.eos_id]
        return self._encoded[reply]
