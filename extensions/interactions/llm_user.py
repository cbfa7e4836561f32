"""A model plays the user: it has instructions and private facts, answers the agent, and says when it is done.

    interaction:
      - name: llm_user
        class_name: extensions.interactions.llm_user.LLMUserInteraction
        config:
          backend: policy                  # the rollout's own server; or: openai
          sampling: {temperature: 0.0, max_tokens: 96}
          instructions: "You are a customer ..."   # optional; DEFAULT_INSTRUCTIONS otherwise
          facts: ["Your order id is 4411."]         # optional; samples add their own
          stop_marker: "###STOP###"
          stop_on_final_answer: true       # end when the agent writes a '#### N' answer
          score: ground_truth              # or: stop_marker
          # backend: openai needs
          # openai: {base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-7B-Instruct,
          #          api_key_env: USER_MODEL_API_KEY, timeout_s: 60, max_retries: 2,
          #          backoff_s: 0.5, max_concurrency: 16}

Per sample, ``interaction_kwargs`` may set ``user_instructions`` (replaces the instructions),
``user_facts`` (a string or a list, added to the config's facts) and ``ground_truth``.

After each assistant turn without tool calls the loop calls ``generate_response``:

1. with ``stop_on_final_answer``, an assistant message with a ``#### N`` line ends the episode;
2. otherwise the user model sees the conversation from the user's side (``user_view``: roles
   swapped, tool traffic and thinking hidden) and writes the next user message;
3. a reply containing ``stop_marker`` ends the episode (the marker is removed from the text).

The loop's ``max_user_turns`` stops a user model that never says the marker. Scores: on the
turn that ends the episode, ``score: ground_truth`` gives ``correct_score`` when the agent's last
answer equals the sample's ``ground_truth`` (else ``wrong_score``); ``score: stop_marker`` gives
``correct_score`` when the user model said the marker. Every other turn scores 0.
"""

from __future__ import annotations

from typing import Any

from extensions.errors import ConfigError, SampleError, choices
from extensions.interactions.base import BaseInteraction, last_assistant_text
from extensions.interactions.user_backends import (
    OpenAIBackend,
    PolicyBackend,
    UserModelError,
    user_view,
    visible_text,
)
from extensions.rewards.gsm8k import extract_answer, is_correct
from extensions.rewards.numbers import normalize_number

STOP_MARKER = "###STOP###"
DEFAULT_INSTRUCTIONS = (
    "You are the user in a conversation with an AI assistant. Your first message in the conversation is "
    "the request you made. Stay in character: write only what you, the user, would say next, in one or "
    "two short sentences. When the assistant asks for information, answer with the facts below; do not "
    "solve the task yourself and do not invent facts you were not given. When the assistant has given "
    "its final answer or there is nothing more to say, reply with {stop_marker} only."
)
CONFIG_KEYS = frozenset(
    {
        "name",
        "backend",
        "instructions",
        "facts",
        "stop_marker",
        "sampling",
        "openai",
        "stop_on_final_answer",
        "score",
        "correct_score",
        "wrong_score",
        "closing_message",
    }
)
BACKENDS = ("policy", "openai")
SCORE_RULES = ("ground_truth", "stop_marker")
SERVICES = ("server_manager", "tokenizer")
"""Keyword arguments the agent loop passes to ``start_interaction`` when ``uses_policy_server`` is true."""


def as_facts(value: Any, *, where: str) -> list[str]:
    """A fact or a list of facts (parquet gives numpy arrays) as a list of strings."""
    if value is None:
        return []
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise SampleError(f"{where} must be a string or a list of strings, got {type(value).__name__}")
    return list(value)


class LLMUserInteraction(BaseInteraction):
    """A simulated user on the policy's server or an OpenAI-compatible endpoint; see the module docstring."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        owner = f"interaction {self.name!r} (LLMUserInteraction)"
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ConfigError(f"{owner}: unknown key(s) {choices(unknown)}; valid: {choices(CONFIG_KEYS)}")
        backend = config.get("backend", "policy")
        if backend not in BACKENDS:
            raise ConfigError(f"{owner}: backend {backend!r} is not one of {choices(BACKENDS)}")
        self.score_rule = config.get("score", "ground_truth")
        if self.score_rule not in SCORE_RULES:
            raise ConfigError(f"{owner}: score {self.score_rule!r} is not one of {choices(SCORE_RULES)}")
        if backend == "openai":
            self.backend: PolicyBackend | OpenAIBackend = OpenAIBackend(
                config.get("openai"), config.get("sampling"), owner=owner
            )
        else:
            if config.get("openai"):
                raise ConfigError(f"{owner}: 'openai' settings are given but backend is 'policy'")
            self.backend = PolicyBackend(config.get("sampling"), owner=owner)
        self.uses_policy_server = self.backend.needs_policy_server
        self.stop_marker = str(config.get("stop_marker", STOP_MARKER))
        self.instructions = str(config.get("instructions", DEFAULT_INSTRUCTIONS))
        self.facts = as_facts(config.get("facts"), where=f"{owner}: config.facts")
        self.stop_on_final_answer = bool(config.get("stop_on_final_answer", False))
        self.correct_score = float(config.get("correct_score", 1.0))
        self.wrong_score = float(config.get("wrong_score", 0.0))
        self.closing_message = str(config.get("closing_message", "Thank you."))
        self._state: dict[str, dict[str, Any]] = {}

    def system_prompt(self, instructions: str, facts: list[str]) -> str:
        """The user model's system message: instructions, then the private facts."""
        text = instructions.replace("{stop_marker}", self.stop_marker)
        if facts:
            text += "\n\nFacts only you know:\n" + "\n".join(f"- {fact}" for fact in facts)
        return text

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        services = {key: kwargs.get(key) for key in SERVICES}
        ground_truth = kwargs.get("ground_truth")
        truth = normalize_number(str(ground_truth)) if ground_truth is not None else None
        if self.score_rule == "ground_truth" and truth is None:
            raise SampleError(
                f"interaction {self.name!r}: score 'ground_truth' needs a numeric interaction_kwargs.ground_truth, "
                f"got {ground_truth!r} (sample keys: {choices(k for k in kwargs if k not in SERVICES)})"
            )
        instance_id = await super().start_interaction(instance_id)
        instructions = kwargs.get("user_instructions")
        facts = self.facts + as_facts(kwargs.get("user_facts"), where="interaction_kwargs.user_facts")
        self._state[instance_id] = {
            "services": services,
            "system": self.system_prompt(str(instructions) if instructions else self.instructions, facts),
            "ground_truth": truth,
            "turns": 0,
            "last_answer": None,
        }
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        state = self._state[instance_id]
        state["turns"] += 1
        agent_text = visible_text(last_assistant_text(messages))
        strict = extract_answer(agent_text, "strict")
        state["last_answer"] = strict or extract_answer(agent_text, "flexible")
        info: dict[str, Any] = {"turn": state["turns"], "answer": state["last_answer"], "stopped_by": None}
        if self.stop_on_final_answer and strict is not None:
            info["stopped_by"] = "final_answer"
            return True, self.closing_message, self._final_score(state, said_marker=False), info
        view = user_view(messages, state["system"])
        request_id = f"{instance_id}:user"
        reply = await self.backend.complete(view, request_id=request_id, services=state["services"])
        if self.stop_marker in reply:
            info["stopped_by"] = "stop_marker"
            text = reply.replace(self.stop_marker, "").strip()
            return True, text, self._final_score(state, said_marker=True), info
        if not reply.strip():
            raise UserModelError(f"interaction {self.name!r}: the user model's reply is empty")
        return False, reply, 0.0, info

    def _final_score(self, state: dict[str, Any], *, said_marker: bool) -> float:
        if self.score_rule == "stop_marker":
            return self.correct_score if said_marker else self.wrong_score
        return self.correct_score if is_correct(state["last_answer"], state["ground_truth"]) else self.wrong_score

    async def calculate_score(self, instance_id: str | None = None, **kwargs: Any) -> float:
        state = self._state.get(instance_id or "")
        if state is None or state["ground_truth"] is None:
            return 0.0
        return self.correct_score if is_correct(state["last_answer"], state["ground_truth"]) else self.wrong_score

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        self._state.pop(instance_id, None)
