"""Where a simulated user's words come from: the policy's own server, or an OpenAI-compatible endpoint.

Both take the user's side of the conversation (``user_view``: the user model's instructions as the
system message, the user's own messages as ``assistant``, the agent's as ``user``, tool traffic and
thinking hidden) and return the user's next message as text.

- ``PolicyBackend``: the rollout's own LLM server (the agent loop hands its ``server_manager`` and
  tokenizer to ``start_interaction``); the prompt is the tokenizer's chat template of the view.
- ``OpenAIBackend``: ``POST {base_url}/chat/completions`` (vLLM ``serve``, SGLang, llama.cpp's
  server, a hosted API) through ``JsonEndpoint`` (shared client, timeout, retries, cap).
"""

from __future__ import annotations

import re
from typing import Any

from extensions.errors import ConfigError, LongflowError, choices
from extensions.interactions.http_client import EndpointError, JsonEndpoint
from extensions.rewards.gsm8k import strip_thinking

POLICY_SAMPLING_KEYS = frozenset({"temperature", "top_p", "top_k", "repetition_penalty", "max_tokens", "seed"})
OPENAI_SAMPLING_KEYS = frozenset({"temperature", "top_p", "max_tokens", "seed", "stop", "presence_penalty"})
EMPTY_AGENT_MESSAGE = "(no visible message from the assistant)"
OPENAI_KEYS = frozenset(
    {"base_url", "model", "api_key_env", "timeout_s", "max_retries", "backoff_s", "max_concurrency"}
)


_TRAILING_SPECIALS = re.compile(r"(?:\s*(?:<\|[A-Za-z0-9_]+\|>|</s>))+\s*$")


def strip_trailing_specials(text: str) -> str:
    """``text`` without the special tokens a generation ends with (``<|im_end|>``, ``</s>``, ...)."""
    return _TRAILING_SPECIALS.sub("", text)


TURN_MARKERS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
"""Chat-template turn markers. A small model playing the user sometimes writes one as plain text and goes
on with an invented next turn (on an H100, Qwen2.5-Coder-0.5B wrote ``<|im_start|>user`` and copied the
assistant's message in 164 of 756 user replies: docs/results/ask-user-h100/); the reply ends there."""


def cut_at_turn_marker(text: str) -> str:
    """``text`` up to the first chat-template turn marker written as text (``TURN_MARKERS``)."""
    cut = min((i for i in (text.find(m) for m in TURN_MARKERS) if i >= 0), default=len(text))
    return text[:cut]


def visible_text(content: Any) -> str:
    """An assistant message as a reader sees it: thinking and trailing special tokens (``<|im_end|>``) removed."""
    text = content if isinstance(content, str) else ""
    return _TRAILING_SPECIALS.sub("", strip_thinking(text)).strip()


class UserModelError(LongflowError):
    """The user model gave no usable reply."""


def user_view(messages: list[dict[str, Any]], system: str) -> list[dict[str, str]]:
    """The conversation as the user sees it: roles swapped, tools, tool calls and thinking hidden.

    The agent's system prompt is dropped; an assistant message that made tool calls is dropped
    (it talks to the tools, not to the user); consecutive messages of one role are joined.
    """
    view: list[dict[str, str]] = [{"role": "system", "content": system}]
    for message in messages:
        role, content = message.get("role"), message.get("content")
        text = content if isinstance(content, str) else ""
        if role == "user":
            role = "assistant"
        elif role == "assistant" and not message.get("tool_calls"):
            role, text = "user", visible_text(text)
        else:
            continue
        text = text.strip()
        if not text:
            continue
        if view[-1]["role"] == role:
            view[-1]["content"] += "\n\n" + text
        else:
            view.append({"role": role, "content": text})
    if view[-1]["role"] != "user":  # the agent said nothing visible: the model must still answer as the user
        view.append({"role": "user", "content": EMPTY_AGENT_MESSAGE})
    return view


COPY_ERROR = "the user model copied the agent's last message instead of answering it as the user"
COPY_MIN_CHARS = 40  # shorter replies ("Thank you!", "Yes.") may be real answers even where the agent said the same


def copies(reply: str, agent_said: str) -> bool:
    """Whether a user reply is the agent's last message(s) again, whole or cut off by max_tokens.

    ``agent_said`` is what the user sees of the agent's turn: consecutive messages joined by blank lines, so a
    copy of any one of them from its start counts. The 0.5B policy playing the user did this in 502 of 687
    replies on 256 problems (docs/results/ask-user-h100/ask_hinted/), and the agent answered nearly every
    copy with the same text again.
    """
    reply = " ".join(reply.split())
    if len(reply) < COPY_MIN_CHARS:
        return False
    parts = agent_said.split("\n\n")
    return any(" ".join("\n\n".join(parts[k:]).split()).startswith(reply) for k in range(len(parts)))


def check_sampling(sampling: Any, allowed: frozenset[str], *, owner: str) -> dict[str, Any]:
    """The user's own sampling parameters, with unknown keys rejected."""
    sampling = dict(sampling or {})
    unknown = set(sampling) - allowed
    if unknown:
        raise ConfigError(f"{owner}: unknown sampling key(s) {choices(unknown)}; valid: {choices(allowed)}")
    return sampling


class PolicyBackend:
    """The user plays on the rollout's own server, with its own sampling parameters."""

    needs_policy_server = True

    def __init__(self, sampling: dict[str, Any], *, owner: str):
        self.sampling = {
            "temperature": 0.0,
            "max_tokens": 128,
            **check_sampling(sampling, POLICY_SAMPLING_KEYS, owner=owner),
        }
        self.owner = owner

    async def complete(self, view: list[dict[str, str]], *, request_id: str, services: dict[str, Any]) -> str:
        server, tokenizer = services.get("server_manager"), services.get("tokenizer")
        if server is None or tokenizer is None:
            raise UserModelError(
                f"{self.owner}: backend 'policy' needs the rollout's server_manager and tokenizer, which the "
                "agent loop passes to start_interaction; this loop passed none (use LongWorkflowAgent)"
            )
        text = tokenizer.apply_chat_template(view, tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer.encode(text, add_special_tokens=False)
        sampling = {**self.sampling, "stop": list(TURN_MARKERS)}  # vLLM stops at a marker written as text
        output = await server.generate(request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling)
        text = tokenizer.decode(output.token_ids, skip_special_tokens=True)
        reply = cut_at_turn_marker(text).strip()
        if not reply:
            detail = (
                " (it began a new turn at once: the model copies instead of playing the user)" if text.strip() else ""
            )
            raise UserModelError(f"{self.owner}: the policy server returned an empty user reply{detail}")
        if copies(reply, view[-1]["content"]):
            raise UserModelError(f"{self.owner}: {COPY_ERROR}")
        return reply


class OpenAIBackend:
    """The user plays on any OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    needs_policy_server = False

    def __init__(self, settings: Any, sampling: dict[str, Any], *, owner: str):
        settings = dict(settings or {})
        unknown = set(settings) - OPENAI_KEYS
        if unknown:
            raise ConfigError(f"{owner}: unknown openai key(s) {choices(unknown)}; valid: {choices(OPENAI_KEYS)}")
        missing = [k for k in ("base_url", "model") if not settings.get(k)]
        if missing:
            raise ConfigError(f"{owner}: backend 'openai' needs openai.{' and openai.'.join(missing)}")
        self.model = str(settings.pop("model"))
        self.sampling = {
            "temperature": 0.0,
            "max_tokens": 256,
            **check_sampling(sampling, OPENAI_SAMPLING_KEYS, owner=owner),
        }
        base = str(settings.pop("base_url")).rstrip("/")
        self.endpoint = JsonEndpoint(f"{base}/chat/completions", owner=owner, **settings)

    async def complete(self, view: list[dict[str, str]], *, request_id: str, services: dict[str, Any]) -> str:
        payload = {"model": self.model, "messages": view, **self.sampling}
        try:
            return await self.endpoint.post(payload, parse=_chat_content)
        except EndpointError as exc:
            raise UserModelError(str(exc)) from None


def _chat_content(data: Any) -> str:
    """``choices[0].message.content`` of a chat completion; empty or missing is a ValueError."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("no 'choices' in the reply")
    message = data["choices"][0].get("message") if isinstance(data["choices"][0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ValueError("no 'choices[0].message.content' string in the reply")
    content = strip_thinking(content).strip()
    if not content:
        raise ValueError("empty reply")
    return content
