"""A demonstrator behind verl's LLM-server interface: ``generate(request_id, *, prompt_ids, sampling_params)``.

``policy`` maps the decoded prompt (special tokens kept: the chat template's turns are visible) to the reply's
text. The reply is tokenized with the run's tokenizer and ends with EOS, and ``engine_cut`` ends it where an engine
would (``stop_token_ids``, ``max_tokens``, ``stop`` strings; the scripted test server shares it), so the agent loop
builds and records its trajectory exactly as for a model; log-probs,
when asked for, are 0.0 (the demonstrator's choice is certain). Run one with the rollout driver:
``python -m extensions.rollout EXPERIMENT --backend demo --demo-policy module:function``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from extensions.errors import ConfigError

Policy = Callable[[str], str]
DEFAULT_POLICY = "extensions.warm_start.ledger_demo:flagged_ledger"


def load_policy(spec: str) -> Policy:
    """``module:function`` to the function; a ConfigError says what is wrong with ``spec``."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"--demo-policy {spec!r}: expected module:function, e.g. {DEFAULT_POLICY}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--demo-policy {spec!r}: cannot import {module_name!r}: {exc}") from None
    policy = getattr(module, name, None)
    if not callable(policy):
        raise ConfigError(f"--demo-policy {spec!r}: {module_name} has no function {name!r}")
    return policy


def engine_cut(tokenizer: Any, ids: list[int], sampling_params: dict[str, Any]) -> tuple[list[int], bool]:
    """(``ids`` as an engine returns them, whether it stopped rather than ran out of ``max_tokens``): cut after the
    first ``stop_token_ids`` token, then at ``max_tokens``, then after the token whose text completes the first
    ``stop`` string (the rest is never generated); stopped = a stop string, or the reply ends with EOS."""
    stop_ids = set(sampling_params.get("stop_token_ids") or [])
    for i, tok in enumerate(ids):
        if tok in stop_ids:
            ids = ids[: i + 1]
            break
    max_tokens = sampling_params.get("max_tokens")
    ids = ids[:max_tokens] if max_tokens is not None else ids
    stops = sampling_params.get("stop") or []
    for end in range(1, len(ids) + 1) if stops else ():
        text = tokenizer.decode(ids[:end], skip_special_tokens=True)
        if any(stop in text for stop in stops):
            return ids[:end], True
    return ids, bool(ids and ids[-1] == tokenizer.eos_token_id)


class DemoServer:
    """Replies with ``policy(decoded prompt)``, token by token as an engine would return them."""

    def __init__(self, tokenizer: Any, policy: Policy):
        self.tokenizer, self.policy = tokenizer, policy
        self.eos_id: int = tokenizer.eos_token_id
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> TokenOutput:
        self.calls += 1
        context = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        ids = [*self.tokenizer.encode(self.policy(context), add_special_tokens=False), self.eos_id]
        ids, stopped = engine_cut(self.tokenizer, ids, sampling_params)
        return TokenOutput(
            token_ids=ids,
            log_probs=[0.0] * len(ids) if sampling_params.get("logprobs") else None,
            stop_reason="completed" if stopped else "length",
            num_preempted=0,
        )
