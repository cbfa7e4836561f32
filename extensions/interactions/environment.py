"""Any gym-style text environment as the user side of a trajectory.

An environment is a class with ``reset() -> observation`` and
``step(action) -> (observation, reward, done, info)`` (strings for observations and
actions). One environment object is created per trajectory with the YAML ``env_kwargs``
updated by the sample's ``interaction_kwargs.env_kwargs``. ``reset()``'s observation is
the opening user message (appended to the prompt before the first generation); each
assistant message without a tool call is passed to ``step()``, whose observation becomes
the next user message and whose reward scores that turn.

    interaction:
      - name: guess_number
        class_name: extensions.interactions.environment.EnvironmentInteraction
        config: {env: extensions.envs.guess_number.GuessNumberEnv, env_kwargs: {low: 1, high: 100}}
"""

from __future__ import annotations

import inspect
from typing import Any

from extensions.errors import ConfigError
from extensions.interactions.base import BaseInteraction, last_assistant_text
from extensions.interactions.registry import import_class

CONFIG_KEYS = {"name", "env", "env_kwargs"}


class EnvironmentInteraction(BaseInteraction):
    """Drives the user side from a text environment."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise ConfigError(
                f"unknown key(s) {sorted(unknown)} for EnvironmentInteraction; valid: {sorted(CONFIG_KEYS)}"
            )
        if not isinstance(config.get("env"), str):
            raise ConfigError("EnvironmentInteraction needs config.env: a dotted class path with reset() and step()")
        self.env_cls = import_class(config["env"], where="config.env")
        missing = [m for m in ("reset", "step") if not callable(getattr(self.env_cls, m, None))]
        if missing:
            raise ConfigError(
                f"config.env {config['env']!r} lacks method(s) {missing}; an env needs reset() and step()"
            )
        self.env_kwargs = dict(config.get("env_kwargs") or {})
        self._check_kwargs(self.env_kwargs, where="config.env_kwargs")
        self._envs: dict[str, Any] = {}
        self._openings: dict[str, str] = {}

    def _check_kwargs(self, kwargs: dict[str, Any], *, where: str) -> None:
        try:
            inspect.signature(self.env_cls).bind_partial(**kwargs)
        except TypeError as exc:
            raise ConfigError(f"{where} does not fit {self.env_cls.__name__}: {exc}") from exc

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        instance_id = await super().start_interaction(instance_id)
        env_kwargs = {**self.env_kwargs, **dict(kwargs.get("env_kwargs") or {})}
        self._check_kwargs(env_kwargs, where="interaction_kwargs.env_kwargs")
        env = self.env_cls(**env_kwargs)
        self._envs[instance_id] = env
        self._openings[instance_id] = str(env.reset())
        return instance_id

    async def opening_message(self, instance_id: str) -> str | None:
        """The observation from ``reset()``; the loop adds it as the first user message."""
        return self._openings.pop(instance_id, None)

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        observation, reward, done, info = self._envs[instance_id].step(last_assistant_text(messages))
        return bool(done), str(observation), float(reward), dict(info or {})

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:
        env = self._envs.pop(instance_id, None)
        self._openings.pop(instance_id, None)
        if env is not None and callable(getattr(env, "close", None)):
            env.close()
