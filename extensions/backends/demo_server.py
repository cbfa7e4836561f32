"""A demonstrator behind verl's LLM-server interface: ``generate(request_id, *, prompt_ids, sampling_params)``.

``policy`` maps the decoded prompt (special tokens kept: the chat template's turns are visible) to the reply's
text. The reply is tokenized with the run's tokenizer and ends with EOS, and ``max_tokens`` cuts it as an
engine's length stop would, so the agent loop builds and records its trajectory exactly as for a model; log-probs,
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
        max_tokens = sampling_params.get("max_tokens")
        cut = max_tokens is not None and len(ids) > max_tokens
        ids = ids[:max_tokens] if cut else ids
        return TokenOutput(
            token_ids=ids,
            log_probs=[0.0] * len(ids) if sampling_params.get("logprobs") else None,
            stop_reason="length" if cut else "completed",
            num_preempted=0,
        )
