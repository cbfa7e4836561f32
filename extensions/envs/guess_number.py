"""Guess-the-number: a tiny text environment (reset/step) for EnvironmentInteraction.

The agent guesses an integer; the environment answers "higher", "lower" or "correct".
Reward per step: 1.0 on the correct guess, else 0.0; ``max_guesses`` wrong guesses end it.
"""

from __future__ import annotations

import random
import re
from typing import Any


class GuessNumberEnv:
    """A secret integer in [low, high]; set ``secret`` for a deterministic game."""

    def __init__(self, low: int = 1, high: int = 100, secret: int | None = None, max_guesses: int = 7, seed: int = 0):
        if low > high:
            raise ValueError(f"low ({low}) must be <= high ({high})")
        self.low, self.high, self.max_guesses = low, high, max_guesses
        self.secret = secret if secret is not None else random.Random(seed).randint(low, high)
        self.guesses = 0

    def reset(self) -> str:
        self.guesses = 0
        return (
            f"I picked an integer between {self.low} and {self.high}. Guess it: answer with one number. "
            f"You have {self.max_guesses} guesses."
        )

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        numbers = re.findall(r"-?\d+", action)
        if not numbers:
            self.guesses += 1
            return "Please answer with a single integer.", 0.0, self.guesses >= self.max_guesses, {"valid": False}
        guess = int(numbers[-1])
        self.guesses += 1
        info = {"valid": True, "guess": guess, "guesses": self.guesses}
        if guess == self.secret:
            return "Correct!", 1.0, True, info
        hint = "higher" if guess < self.secret else "lower"
        done = self.guesses >= self.max_guesses
        return (f"No, go {hint}." if not done else f"No. Out of guesses; it was {self.secret}."), 0.0, done, info
