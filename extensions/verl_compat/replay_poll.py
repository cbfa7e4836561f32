"""The v1 replay buffer's poll: how soon the trainer takes a batch once its last trajectory is done.

verl 0.9.1's ``ReplayBuffer.sample`` (``trainer/ppo/v1/replay_buffer.py``) reads TransferQueue's
metadata, and while too few groups are finished it sleeps ``poll_interval`` (2.0 s; ``trainer_base.
_build_replay_buffer`` passes no value, so no config key reaches it). Every generation phase is thus
rounded up to a multiple of 2 s, and a step waits on average 1 s after its last trajectory for nothing.

``hook_replay_buffer`` wraps ``PPOTrainer._build_replay_buffer`` (called in the trainer's ``__init__``, before any
worker or model): it first runs the check the plugin set (``set_config_check``: the pack's v1 checks, every problem
at once), then the buffer verl builds (its own or a
``custom_sampler``) gets ``trainer.v1.sampler.sampler_kwargs.poll_interval_s`` when that key is set
(verl's built-in samplers ignore ``sampler_kwargs``), and its ``sample`` records when it returned
(``last_sample_returned_at``), so a metric can say how long after the batch's last trajectory the trainer
took it. Without the key verl's 2 s stays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import wrapt

POLL_KEY = "poll_interval_s"
"""Under ``trainer.v1.sampler.sampler_kwargs``: seconds between the replay buffer's checks."""
POLL_DOC = (
    "Seconds between the v1 replay buffer's checks for finished groups, in (0, 60]. Default (unset): verl's 2 s, "
    "which rounds every generation phase up to a multiple of 2 s; the pack's experiments set 0.05."
)
MAX_POLL_S = 60.0

_SAMPLED: dict[str, float | None] = {"returned_at": None}
_CONFIG_CHECK: dict[str, Callable[[Any], None] | None] = {"fn": None}


def set_config_check(check: Callable[[Any], None] | None) -> None:
    """What ``hook_replay_buffer`` runs on the trainer's config before verl builds anything (it raises on a bad
    config; the plugin passes ``trainer_mode_check.raise_trainer_problems``)."""
    _CONFIG_CHECK["fn"] = check


def poll_interval(config: Any) -> float | None:
    """``trainer.v1.sampler.sampler_kwargs.poll_interval_s`` of a trainer config, checked; None when unset.

    Raises ``ValueError`` naming the key and what is valid: a number of seconds in (0, 60].
    """
    trainer = config.get("trainer") or {}
    sampler = (trainer.get("v1") or {}).get("sampler") or {}
    value = (sampler.get("sampler_kwargs") or {}).get(POLL_KEY)
    if value is None:
        return None
    where = f"trainer.v1.sampler.sampler_kwargs.{POLL_KEY}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {value!r} is not a number; valid: seconds between checks, in (0, {MAX_POLL_S:g}]")
    if not math.isfinite(value) or not 0 < value <= MAX_POLL_S:
        raise ValueError(f"{where}: {value!r} is out of range; valid: seconds between checks, in (0, {MAX_POLL_S:g}]")
    return float(value)


def last_sample_returned_at() -> float | None:
    """``time.time()`` when the replay buffer's ``sample`` last returned a training batch in this process (the
    trainer), or None."""
    return _SAMPLED["returned_at"]


@wrapt.decorator
def _timed_sample(wrapped, instance, args, kwargs):
    result = wrapped(*args, **kwargs)
    partition = kwargs.get("partition_id", args[1] if len(args) > 1 else None)
    if partition == "train":  # a validation's sample (between a step's sample and its metrics) is not the step's
        _SAMPLED["returned_at"] = time.time()
    return result


def hook_replay_buffer(trainer_cls: type) -> None:
    """Wrap ``trainer_cls._build_replay_buffer`` (v1 ``PPOTrainer``): set the poll, time ``sample``."""

    @wrapt.decorator
    def with_poll(wrapped, instance, args, kwargs):
        trainer = instance if instance is not None else args[0]  # called on the class: PPOTrainer._build...(self)
        if (check := _CONFIG_CHECK["fn"]) is not None:
            check(trainer.config)  # in the trainer's __init__, before any worker or model
        interval = poll_interval(trainer.config)
        buffer = wrapped(*args, **kwargs)
        if interval is not None:
            buffer.poll_interval = interval
        buffer.sample = _timed_sample(buffer.sample)
        return buffer

    trainer_cls._build_replay_buffer = with_poll(trainer_cls._build_replay_buffer)
