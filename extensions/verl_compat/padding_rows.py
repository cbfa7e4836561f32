"""The v1 trainer's padding rows, as short as the training engines allow.

verl 0.9.1's v1 trainer pads every batch to a multiple of ``lcm(dp ranks, ppo_mini_batch_size x rollout.n)`` rows
(and the critic's mini-batch, with a critic: ``PPOTrainer._balance_batch`` -> ``padding_utils.
upsample_batch_to_divisible_size``) with no-op rows: fully loss-masked, of ``padding_utils.SYNTHETIC_PADDING_SEQ_LEN``
= 128 tokens (127 prompt, 1 response), which the actor (and a critic) still run forward and backward. verl made them
2 tokens at first ("the shortest possible sequence", verl PR #5969) and 128 later (PR #7593), so that Megatron's
packed context-parallel split (TP x CP up to 64) never hands a rank an empty slice. FSDP splits no row: it packs a
micro-batch into one sequence, and Ulysses sequence parallelism pads that whole sequence, not each row. Where folding
makes a batch's rows vary, ~160 real rows become 1,536 and the padding is 50-59 % of the tokens the actor runs on
(docs/results/folding-scaling-h200x2).

``hook_balance_batch`` wraps ``PPOTrainer._balance_batch``: while it runs, the padding rows have
``padding_row_tokens(config)`` tokens: ``trainer.v1.padding_row_tokens`` when set, else 2 when every model trained on
them (the actor, and the critic when there is one) is on FSDP, else verl's own length. The setting is checked when
the trainer is built, before any model loads, by the check the plugin passes
(``replay_poll.set_config_check``); without it, when the first batch is padded. verl's ``perf/`` token counts
include the padding rows.

verl gives ``_balance_batch`` no timer, so its seconds (building and storing the padding rows, balancing the rows
across ranks: driver work that grows with the padded batch, docs/results/folding-weak-scaling-h200x4) hid in the
step's untimed remainder. The wrapper adds them to the trainer's ``timing_raw`` as ``balance_batch``, which verl logs
as ``timing_s/balance_batch`` (summed over a step's mini-steps, as verl's own timers are).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import wrapt

logger = logging.getLogger(__name__)

KEY = "trainer.v1.padding_row_tokens"
DOC = (
    "Tokens of each no-op row verl's v1 trainer pads a batch with (to a multiple of the mini-batch's rows). "
    "Default (null): 2 when the actor (and the critic, if any) train on FSDP, verl's 128 on any other engine; 128 "
    "gives verl's own rows back."
)
MIN_TOKENS = 2  # one prompt token and one (masked) response token
TIMER = "balance_batch"  # verl logs timing_raw[TIMER] as timing_s/balance_batch
FSDP_STRATEGIES = ("fsdp", "fsdp2")
_LOGGED: set[int] = set()


def padding_row_tokens(config: Any) -> int | None:
    """Tokens of each padding row for a trainer config; None keeps verl's. Raises ``ValueError`` naming the key
    and what is valid for a bad ``trainer.v1.padding_row_tokens``."""
    value = ((config.get("trainer") or {}).get("v1") or {}).get("padding_row_tokens")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_TOKENS:
            raise ValueError(
                f"{KEY}: {value!r} is not valid; valid: a whole number of tokens >= {MIN_TOKENS} (a padding row's "
                f"prompt tokens and its one masked response token), or null for the default"
            )
        return value
    actor = (config.get("actor_rollout_ref") or {}).get("actor") or {}
    strategies = [actor.get("strategy")]
    if uses_critic(config):
        strategies.append((config.get("critic") or {}).get("strategy"))
    return MIN_TOKENS if all(strategy in FSDP_STRATEGIES for strategy in strategies) else None


def uses_critic(config: Any) -> bool:
    """Whether the trainer trains a critic, as verl's ``need_critic`` decides: ``critic.enable`` when set, else
    whether the estimator is GAE."""
    enable = (config.get("critic") or {}).get("enable")
    if enable is not None:
        return bool(enable)
    return (config.get("algorithm") or {}).get("adv_estimator") == "gae"


@contextlib.contextmanager
def short_padding_rows(tokens: int | None) -> Iterator[None]:
    """Inside the block verl's padding rows have ``tokens`` tokens (None: verl's length)."""
    from verl.trainer.ppo import padding_utils

    if tokens is None:
        yield
        return
    verl_length = padding_utils.SYNTHETIC_PADDING_SEQ_LEN
    padding_utils.SYNTHETIC_PADDING_SEQ_LEN = tokens
    try:
        yield
    finally:
        padding_utils.SYNTHETIC_PADDING_SEQ_LEN = verl_length


def hook_balance_batch(trainer_cls: type) -> None:
    """Wrap ``trainer_cls._balance_batch`` (v1 ``PPOTrainer``): padding rows of ``padding_row_tokens`` tokens, its
    seconds added to the trainer's ``timing_raw[TIMER]``."""

    @wrapt.decorator
    def with_short_rows(wrapped, instance, args, kwargs):
        trainer = instance if instance is not None else args[0]
        tokens = padding_row_tokens(trainer.config)
        if tokens is not None and id(trainer) not in _LOGGED:
            from verl.trainer.ppo import padding_utils

            _LOGGED.add(id(trainer))
            verl_length = padding_utils.SYNTHETIC_PADDING_SEQ_LEN
            logger.info("longflow: verl's padding rows have %d tokens, not %d (%s)", tokens, verl_length, KEY)
        started = time.perf_counter()
        try:
            with short_padding_rows(tokens):
                return wrapped(*args, **kwargs)
        finally:
            timing = getattr(trainer, "timing_raw", None)
            if isinstance(timing, dict):
                timing[TIMER] = timing.get(TIMER, 0.0) + time.perf_counter() - started

    trainer_cls._balance_batch = with_short_rows(trainer_cls._balance_batch)
