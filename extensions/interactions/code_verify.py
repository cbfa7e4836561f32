"""The code-verify user: "Are you sure? Can you write Python code to verify your answer?"

After the model's first answer (an assistant turn with no tool call), the user asks it to
verify with code; the model runs Python through the sandboxed ``python_exec`` tool and
answers again. Each answer is checked against ``interaction_kwargs.ground_truth`` and the
turn scored ``correct_score`` or ``wrong_score``. After ``max_verify_rounds`` requests the
next answer ends the episode.
"""

from __future__ import annotations

from typing import Any

from extensions.errors import ConfigError, SampleError
from extensions.interactions.base import BaseInteraction, last_assistant_text
from extensions.rewards.gsm8k import extract_answer, is_correct

VERIFY_PROMPT = "Are you sure? Can you write Python code to verify your answer?"
CONFIG_KEYS = {"name", "max_verify_rounds", "verify_prompt", "closing_message", "correct_score", "wrong_score"}


def final_answer(text: str) -> str | None:
    """The ``#### N`` answer if there is one, else the last number (thinking ignored)."""
    return extract_answer(text, "strict") or extract_answer(text, "flexible")


class CodeVerifyInteraction(BaseInteraction):
    """Asks for code verification, then checks and scores every answer."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ConfigError(
                f"unknown key(s) {sorted(unknown)} for CodeVerifyInteraction; valid: {sorted(CONFIG_KEYS)}"
            )
        self.max_verify_rounds = int(config.get("max_verify_rounds", 1))
        self.verify_prompt = str(config.get("verify_prompt", VERIFY_PROMPT))
        self.closing_message = str(config.get("closing_message", "Thank you."))
        self.correct_score = float(config.get("correct_score", 1.0))
        self.wrong_score = float(config.get("wrong_score", 0.0))
        self._state: dict[str, dict[str, Any]] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        ground_truth = kwargs.get("ground_truth")
        if ground_truth is None or str(ground_truth).strip() == "":
            raise SampleError(
                "interaction 'code_verify' needs interaction_kwargs.ground_truth (the expected number), "
                f"but the sample's interaction_kwargs has keys {sorted(kwargs)}"
            )
        instance_id = await super().start_interaction(instance_id)
        self._state[instance_id] = {"ground_truth": str(ground_truth), "rounds": 0, "answers": []}
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        state = self._state[instance_id]
        answer = final_answer(last_assistant_text(messages))
        correct = is_correct(answer, state["ground_truth"])
        state["answers"].append(answer)
        score = self.correct_score if correct else self.wrong_score
        info = {"answer": answer, "correct": correct, "round": state["rounds"]}
        if state["rounds"] < self.max_verify_rounds:
            state["rounds"] += 1
            return False, self.verify_prompt, score, info
        return True, self.closing_message, score, info

    async def calculate_score(self, instance_id: str | None = None, **kwargs: Any) -> float:
        state = self._state.get(instance_id or "", {})
        answers = state.get("answers") or [None]
        return self.correct_score if is_correct(answers[-1], state.get("ground_truth", "")) else 0.0

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        self._state.pop(instance_id, None)
