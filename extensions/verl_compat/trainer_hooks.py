"""Trainer hooks: per-row loop records while verl computes advantages, a post-step on v1's advantages,
and ``longflow/`` metrics.

Installed by the plugin in every process and applied lazily, through ``wrapt``'s post-import
hooks, when verl's trainer modules are imported (see the package docstring).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import wrapt

from extensions.verl_compat.padding_rows import hook_balance_batch
from extensions.verl_compat.replay_poll import hook_replay_buffer, last_sample_returned_at, set_config_check
from extensions.verl_compat.whole_batch import hook_whole_batch, whole_batch_update

logger = logging.getLogger(__name__)

Rows = list[dict[str, Any] | None]
_ROWS: ContextVar[Callable[[], Rows | None] | None] = ContextVar("longflow_advantage_rows", default=None)


def advantage_rows() -> Rows | None:
    """The current batch's ``extras`` per row while verl computes advantages, else None.

    The rows are read on the first call in a batch (only a pack estimator asks, so runs with verl's
    own estimators never fetch them) and kept for the rest of it.
    """
    source = _ROWS.get()
    return None if source is None else source()


@contextlib.contextmanager
def batch_rows(read: Callable[[], Rows | None] | None) -> Iterator[None]:
    """Make ``read`` (called at most once) the source of ``advantage_rows()`` inside the block.

    ``read=None`` leaves an outer block's source in place (e.g. v1's fetch around verl's inner call).
    """
    if read is None:
        yield
        return
    cache: list[Rows | None] = []

    def once() -> Rows | None:
        if not cache:
            cache.append(read())
        return cache[0]

    token = _ROWS.set(once)
    try:
        yield
    finally:
        _ROWS.reset(token)


def extras_rows(extra_fields: Any) -> Rows:
    """``extras`` of each row from a column of ``extra_fields`` dicts (v1) or of ``extras`` (legacy)."""
    rows = []
    for value in list(extra_fields):
        if isinstance(value, dict) and "extras" in value:
            value = value["extras"]
        rows.append(value if isinstance(value, dict) and "turns" in value else None)
    return rows


def _legacy_rows(data: Any) -> Rows | None:
    column = data.non_tensor_batch.get("extras") if hasattr(data, "non_tensor_batch") else None
    return None if column is None else extras_rows(column)


def _tq_rows(batch: Any, keys: list[str] | None = None) -> Rows:
    import transfer_queue as tq

    keys = list(batch.keys) if keys is None else keys
    data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    # a non-tensor column comes back as a tensordict LinkedList (a list, no .tolist()), as in verl's own
    # _compute_reward_colocate; list() also takes a NonTensorStack or a numpy array
    return extras_rows(list(data["extra_fields"]))


def _v1_advantage_rows(batch: Any) -> Rows:
    """Each row's ``extras`` for the advantage step; verl's padding rows (``tag["is_padding"]``, copies of the
    first row's records) are None, so they count as no trajectory. Only the real rows are read: a folding batch
    can be 90 % padding (docs/results/folding-scaling-h200x2)."""
    keys = real_keys(batch)
    rows = _tq_rows(batch, keys)
    if len(rows) != len(keys):
        raise ValueError(f"TransferQueue returned {len(rows)} rows for the batch's {len(keys)} real keys")
    real = iter(rows)
    return [None if tag.get("is_padding", False) else next(real) for tag in batch.tags]


# -- trainer hooks -----------------------------------------------------------------------------


class RowsReadError(RuntimeError):
    """The per-row records of a batch could not be read while verl computes its advantages."""


def _required(what: str, fn: Callable[[], Any]) -> Any:
    """Run a read that the advantages depend on; on any error fail the step, saying what and how to check.

    Unlike ``_guarded``: without the rows, folded trajectories would weigh N times and the error-rate check
    could not run, so training must not go on."""
    try:
        return fn()
    except Exception as exc:
        raise RowsReadError(
            f"verl-longflow: {what} failed ({type(exc).__name__}: {exc}); the step stops rather than compute "
            "advantages without them (segment weights, turn credit, the error-rate check). Run "
            "`pytest tests/test_verl_compat.py` to see whether the installed verl changed."
        ) from exc


def _guarded(what: str, fn: Callable[[], Any], default: Any = None) -> Any:
    """Run a hook's own work; on any error log it and return ``default``: a hook never fails a run.

    Without rows the turn-level estimators fall back to the outcome (and say so); without metrics
    only the ``longflow/`` keys are missing.
    """
    try:
        return fn()
    except Exception as exc:
        logger.warning(
            "verl-longflow: %s failed (%s: %s); training goes on without it. Run "
            "`pytest tests/test_verl_compat.py` to see whether the installed verl changed.",
            what,
            type(exc).__name__,
            exc,
        )
        return default


AdvantagePost = Callable[[Any, "Rows | None", Any], None]
_ADVANTAGE_POST: dict[str, AdvantagePost | None] = {"fn": None}
"""``fn(data, rows, algorithm_config)`` runs after v1's ``compute_advantage_for_multi_trajectories`` and
may rescale ``data.batch["advantages"]`` in place (the plugin passes the segment weights)."""

MetricsFn = Callable[[Any], dict[str, float]]
_METRICS: dict[str, Callable[..., dict[str, float]]] = {
    "training": lambda rows, **kwargs: {},
    "validation": lambda infos, data_sources=None: {},
}
"""What the hooks add: ``training(rows, sampled_at=None)`` per step (each row's ``extras`` or None; v1 passes
``sampled_at``, when its replay buffer returned the batch), ``validation(infos,
data_sources)`` per validation (verl's ``reward_extra_infos_dict`` and each row's data_source).
``install_trainer_hooks`` sets them."""


def longflow_metrics(rows: Any, **kwargs: Any) -> dict[str, float]:
    return _METRICS["training"](rows, **kwargs)


def validation_metrics(infos: Any, data_sources: Any = None) -> dict[str, float]:
    return _METRICS["validation"](infos, data_sources=data_sources)


def _hook_legacy_trainer(module: Any) -> None:
    """verl/trainer/ppo/ray_trainer.py: RayPPOTrainer.fit calls these two module globals."""

    @wrapt.decorator
    def with_rows(wrapped, instance, args, kwargs):
        data = args[0] if args else kwargs["data"]
        has_rows = "extras" in getattr(data, "non_tensor_batch", {})
        read = (lambda: _required("reading per-row records", lambda: _legacy_rows(data))) if has_rows else None
        with batch_rows(read):
            return wrapped(*args, **kwargs)

    @wrapt.decorator
    def plus_metrics(wrapped, instance, args, kwargs):
        metrics = wrapped(*args, **kwargs)
        batch = args[0] if args else kwargs["batch"]
        rows = _guarded("reading per-row records", lambda: _legacy_rows(batch))
        if rows is not None:
            metrics.update(_guarded("longflow/ metrics", lambda: longflow_metrics(rows), {}))
        return metrics

    module.compute_advantage = with_rows(module.compute_advantage)
    module.compute_data_metrics = plus_metrics(module.compute_data_metrics)
    _hook_val_metrics(module.RayPPOTrainer)


def _hook_v1_trainer(module: Any) -> None:
    """verl/trainer/ppo/v1/trainer_base.py: PPOTrainer's advantage, metrics and validation steps."""

    trainer = module.PPOTrainer

    @wrapt.decorator
    def with_rows(wrapped, instance, args, kwargs):
        batch = args[0] if args else kwargs["batch"]
        with batch_rows(
            lambda: _required("reading per-row records from TransferQueue", lambda: _v1_advantage_rows(batch))
        ):
            return wrapped(*args, **kwargs)

    @wrapt.decorator
    def plus_metrics(wrapped, instance, args, kwargs):
        result = wrapped(*args, **kwargs)
        batch = args[0] if args else kwargs["batch"]
        metrics = args[1] if len(args) > 1 else kwargs["metrics"]

        def compute() -> dict[str, float]:
            keys = real_keys(batch)
            return longflow_metrics(_tq_rows(batch, keys), sampled_at=last_sample_returned_at())

        metrics.update(_guarded("longflow/ metrics", compute, {}))
        metrics.update(_guarded("longflow/actor_optimizer_steps", lambda: actor_optimizer_steps(instance, batch), {}))
        return result

    @wrapt.decorator
    def then_post(wrapped, instance, args, kwargs):
        data = wrapped(*args, **kwargs)
        post = _ADVANTAGE_POST["fn"]
        if post is not None:
            post(data, advantage_rows(), kwargs.get("config"))
        return data

    trainer._compute_advantage = with_rows(trainer._compute_advantage)
    trainer._compute_metrics = plus_metrics(trainer._compute_metrics)
    module.compute_advantage_for_multi_trajectories = then_post(module.compute_advantage_for_multi_trajectories)
    _hook_val_metrics(trainer)
    hook_replay_buffer(trainer)
    hook_balance_batch(trainer)
    hook_whole_batch(trainer)


def real_keys(batch: Any) -> list[str]:
    """The keys of a v1 batch's rows, less the no-op rows verl pads it with (``tag["is_padding"]``)."""
    return [key for key, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding", False)]


_WARNED = {"optimizer_steps": False}


def actor_optimizer_steps(trainer: Any, batch: Any) -> dict[str, float]:
    """How many optimizer steps the actor takes on this step's batch: one per ``ppo_mini_batch_size x rollout.n``
    ROWS (verl pads the batch to a multiple of that), times ``ppo_epochs`` (``PPOTrainer._update_actor``,
    ``engine_workers.py``'s ``total_num_iterations``). A folded trajectory is a row per segment, so folding
    multiplies this unless ``ppo_mini_batch_size`` grows with the segments (docs/results/ledger-fold-grpo30-h100:
    207 steps in 30, and folding fell from 126/128 to 94/128). The first step where trajectories of several rows
    add optimizer steps logs a warning that says how to have one. With ``trainer.v1.whole_batch_update``
    (``whole_batch.py``) each actor update takes its batch whole: ``parameter_sync_step`` (separate_async's actor
    updates a step, else 1) x ``ppo_epochs``. ``longflow/batch/padding_rows`` counts the no-op rows verl added
    (2 tokens each on an FSDP actor, verl's 128 elsewhere: ``padding_rows.py``), which the actor still runs forward
    and backward on and the driver builds, stores and scores (docs/results/folding-weak-scaling-h200x4)."""
    config = trainer.config.actor_rollout_ref
    per_step = int(config.actor.ppo_mini_batch_size) * int(config.rollout.n)
    epochs = int(config.actor.ppo_epochs)
    real = real_keys(batch)
    whole = whole_batch_update(trainer.config)  # the whole (sub-)batch is the one mini-batch of each actor update
    if whole:
        steps = int(getattr(trainer, "parameter_sync_step", 1)) * epochs
    else:
        steps = -(-len(batch.keys) // per_step) * epochs
    trajectories = len({key.rsplit("_", 1)[0] for key in real})  # keys are {uid}_{session}_{output index}
    unfolded = -(-trajectories // per_step) * epochs
    if not whole and steps > unfolded and not _WARNED["optimizer_steps"]:
        _WARNED["optimizer_steps"] = True
        logger.warning(
            "verl-longflow: %d trajectories came as %d rows (a folded trajectory is a row per segment), so the "
            "actor takes %d optimizer steps this training step instead of %d (one per ppo_mini_batch_size=%d x "
            "rollout.n=%d rows, x ppo_epochs=%d). Each step moves the weights, on rows of zero advantage too "
            "(AdamW's momentum). For one per training step set +trainer.v1.whole_batch_update=true, or "
            "actor_rollout_ref.actor.ppo_mini_batch_size to data.train_batch_size x the loop's fold.max_segments "
            "(docs/results/ledger-fold-grpo30-mb96-h100); verl then pads each batch to a multiple of "
            "ppo_mini_batch_size x rollout.n rows with no-op rows, which cost driver time, and actor time at verl's 128 tokens a row (trainer.v1.padding_row_tokens; "
            "longflow/batch/padding_rows). longflow/actor_optimizer_steps logs the count every step.",
            trajectories,
            len(real),
            steps,
            unfolded,
            int(config.actor.ppo_mini_batch_size),
            int(config.rollout.n),
            epochs,
        )
    return {
        "longflow/actor_optimizer_steps": float(steps),
        "longflow/batch/padding_rows": float(len(batch.keys) - len(real)),
    }


def _hook_val_metrics(trainer: type) -> None:
    """``_val_metrics_update(data_sources, sample_uids, reward_extra_infos_dict, ...)`` -> dict of metrics."""

    @wrapt.decorator
    def plus_metrics(wrapped, instance, args, kwargs):
        metrics = wrapped(*args, **kwargs)
        infos = args[2] if len(args) > 2 else kwargs["reward_extra_infos_dict"]
        sources = args[0] if args else kwargs.get("data_sources")
        metrics.update(_guarded("longflow/val/ metrics", lambda: validation_metrics(infos, sources), {}))
        return metrics

    trainer._val_metrics_update = plus_metrics(trainer._val_metrics_update)


TRAINER_HOOKS: dict[str, Callable[[Any], None]] = {
    "verl.trainer.ppo.ray_trainer": _hook_legacy_trainer,
    "verl.trainer.ppo.v1.trainer_base": _hook_v1_trainer,
}
_INSTALLED: set[str] = set()


def install_trainer_hooks(
    *,
    training_metrics: MetricsFn | None = None,
    validation_metrics: Callable[..., dict[str, float]] | None = None,
    advantage_post: AdvantagePost | None = None,
    config_check: Callable[[Any], None] | None = None,
) -> None:
    """Hook each trainer module once, when it is imported (now, if it already is).

    The hooks add ``training_metrics(rows)`` to every training step's metrics and
    ``validation_metrics(infos, data_sources=...)`` to every validation's (the plugin passes ``extensions.metrics``'s),
    run ``advantage_post(data, rows, config)`` after v1's advantages (the segment weights), and ``config_check(config)``
    in the v1 trainer's constructor, before any worker or model (``replay_poll.set_config_check``).
    """
    if config_check is not None:
        set_config_check(config_check)
    if training_metrics is not None:
        _METRICS["training"] = training_metrics
    if validation_metrics is not None:
        _METRICS["validation"] = validation_metrics
    if advantage_post is not None:
        _ADVANTAGE_POST["fn"] = advantage_post
    for name, hook in TRAINER_HOOKS.items():

        def apply(module: Any, name: str = name, hook: Callable[[Any], None] = hook) -> None:
            if name not in _INSTALLED:
                hook(module)
                _INSTALLED.add(name)

        wrapt.register_post_import_hook(apply, name)


def installed_trainer_hooks() -> list[str]:
    """Trainer modules hooked so far in this process."""
    return sorted(_INSTALLED)
