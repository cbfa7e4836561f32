"""One actor optimizer step a training step on the batch's own rows: ``trainer.v1.whole_batch_update``.

verl 0.9.1's v1 trainer takes one actor optimizer step per ``ppo_mini_batch_size x rollout.n`` ROWS and pads every
batch to a multiple of that (``PPOTrainer._get_required_batch_multiple`` -> ``_balance_batch``). A folded trajectory
is a row per segment, so a folding batch's rows vary from step to step; the folding presets set the mini-batch to
the most rows a batch can have (one optimizer step a training step), and verl pads ~170 real rows to 1,536 a GPU on
its single controller. That driver work doubles with the batch: it held folding's weak scaling at 2 GPUs to 1.66x
(docs/results/folding-weak-scaling-h200x4).

With ``trainer.v1.whole_batch_update: true`` a batch is padded only to a multiple of the actor's data-parallel
ranks (at most ranks - 1 no-op rows), and ``_update_actor`` hands the actor the whole batch as its one mini-batch
(``mini_batch_size`` = ``global_batch_size`` = the batch's rows): one optimizer step a training step, times
``ppo_epochs``, however many rows the trajectories made. ``ppo_mini_batch_size`` then sizes only verl's own checks
and ``separate_async``'s sampling (which updates the actor once per ``parameter_sync_step`` sub-batch: that many
optimizer steps a training step). Under verl's default ``token-mean`` loss (and ``token-sum``) the step is the padded
one's: the loss is divided by the mini-batch's loss tokens, and a no-op row has none. The ``seq-mean-*`` modes divide
by the mini-batch's rows (``global_batch_size``), which then are the batch's real rows, not the padded count: their
loss is larger by padded / real rows (about 9x on the folding presets) than with verl's padding (both checked
through verl's own policy loss: ``tests/test_v1_whole_batch_loss.py``).

Refused, with the reason, where it cannot work: with a critic (it trains on verl's critic mini-batches, which need
verl's padding), and with fixed micro-batches (``use_dynamic_bsz`` false for the actor, or for the rollout's or the
reference's log-probs): a GPU's rows then follow the trajectories and need not divide into micro-batches.
"""

from __future__ import annotations

from typing import Any

import wrapt

from extensions.verl_compat.padding_rows import uses_critic

KEY = "trainer.v1.whole_batch_update"
DOC = (
    "One actor optimizer step a training step on the batch's own rows: verl pads the batch only to a multiple of "
    "the actor's data-parallel ranks (not of ppo_mini_batch_size x rollout.n rows) and the actor update takes the "
    "whole batch as one mini-batch. For loops whose trajectories give a varying number of rows (folding). Not with "
    "a critic."
)


def dynamic_micro_batches(config: Any) -> dict[str, bool]:
    """Each key that makes a micro-batch split by tokens (true) or by a fixed row count (false), as verl reads it:
    the rollout's and the reference's log-prob keys default to the actor's."""
    models = config.get("actor_rollout_ref") or {}
    actor = bool((models.get("actor") or {}).get("use_dynamic_bsz", False))
    return {
        "actor_rollout_ref.actor.use_dynamic_bsz": actor,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": bool(
            (models.get("rollout") or {}).get("log_prob_use_dynamic_bsz", actor)
        ),
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": bool(
            (models.get("ref") or {}).get("log_prob_use_dynamic_bsz", actor)
        ),
    }


def whole_batch_update(config: Any) -> bool:
    """Whether ``trainer.v1.whole_batch_update`` is on. Raises ``ValueError`` naming the key and what is valid for
    a value that is not a boolean, and for ``true`` in a run that trains a critic or has fixed micro-batches."""
    value = ((config.get("trainer") or {}).get("v1") or {}).get("whole_batch_update")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{KEY}: {value!r} is not valid; valid: true or false (default false)")
    if value and uses_critic(config):
        raise ValueError(
            f"{KEY}: true is not valid in a run that trains a critic (critic.enable, or adv_estimator=gae): the "
            "critic trains on verl's mini-batches, which need verl's padding; valid: false"
        )
    fixed = [key for key, dynamic in dynamic_micro_batches(config).items() if not dynamic]
    if value and fixed:
        raise ValueError(
            f"{KEY}: true is not valid with fixed micro-batches ({', '.join(f'{key}=false' for key in fixed)}): a "
            "GPU's rows then follow the trajectories and need not divide into micro-batches; valid: those keys true "
            "(micro-batches by tokens, ppo_max_token_len_per_gpu), or false"
        )
    return value


class _WholeBatchActor:
    """The actor worker group, except that ``update_actor`` takes the batch as one mini-batch."""

    def __init__(self, group: Any) -> None:
        self._group = group

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)

    def update_actor(self, batch: Any, *args: Any, **kwargs: Any) -> Any:
        rows = len(batch.keys)
        batch.extra_info.update(mini_batch_size=rows, global_batch_size=rows)
        return self._group.update_actor(batch, *args, **kwargs)


def hook_whole_batch(trainer_cls: type) -> None:
    """Wrap ``trainer_cls._get_required_batch_multiple`` and ``_update_actor`` (v1 ``PPOTrainer``): with the setting
    on, the data-parallel ranks alone set the batch's multiple, and the actor takes the whole batch at once."""

    def trainer_of(instance: Any, args: tuple) -> tuple[Any, tuple]:
        return (instance, args) if instance is not None else (args[0], args[1:])

    @wrapt.decorator
    def ranks_only(wrapped, instance, args, kwargs):
        trainer, rest = trainer_of(instance, args)
        if not whole_batch_update(trainer.config):
            return wrapped(*args, **kwargs)
        return int(rest[0] if rest else kwargs["dp_size"])

    @wrapt.decorator
    def one_mini_batch(wrapped, instance, args, kwargs):
        trainer, _ = trainer_of(instance, args)
        if not whole_batch_update(trainer.config):
            return wrapped(*args, **kwargs)
        group = trainer.actor_rollout_wg
        trainer.actor_rollout_wg = _WholeBatchActor(group)
        try:
            return wrapped(*args, **kwargs)
        finally:
            trainer.actor_rollout_wg = group

    trainer_cls._get_required_batch_multiple = ranks_only(trainer_cls._get_required_batch_multiple)
    trainer_cls._update_actor = one_mini_batch(trainer_cls._update_actor)
