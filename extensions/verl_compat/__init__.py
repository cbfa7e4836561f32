"""The pack's one seam to verl's internals: every private name it reads and every verl object it patches.

This package is the only place that does either, and it knows none of the pack's features: it
offers hook points and ``extensions/plugin.py`` (the composition root) passes the pack's functions
in (``tests/test_verl_compat.py`` forbids any other ``extensions.*`` import here). ``registries``
(verl's name tables, the ``verl.interactions`` alias of a given module, the tool-YAML loader with a
given expansion, the Continuous Token prefix cache),
``trainer_hooks`` (per-row records for advantage estimators, a post-step on v1's advantages,
``longflow/`` metrics), ``worker_hooks`` (the rollout driver's worker taking a list of outputs) and
``reliances`` (what each of those takes from verl, checked by ``tests/test_verl_compat.py``).

verl 0.9.1 does not promise to keep any of what follows. Each reliance is a ``Reliance`` entry in
``RELIANCES`` with a one-line reason and the verl file it mirrors; ``tests/test_verl_compat.py``
walks them against the installed verl and fails, naming the entry, when one is gone or changed.
When verl moves, this package and that test are the places to look.

At import, ``check_verl_version()`` compares the installed verl with ``TESTED_VERL`` and raises
``VerlVersionError`` (naming both and what to do) on any other version, unless
``LONGFLOW_ALLOW_UNTESTED_VERL=1`` is set, which turns the error into a warning.

Trainer hooks (``install_trainer_hooks``; the plugin installs them in every process, applied
lazily when verl's trainer modules are imported, through ``wrapt``'s post-import hooks):

- per-row loop records for advantage estimators: while verl computes advantages, the batch's
  ``extras`` (one dict per row, ``None`` for rows of loops without records) are available from
  ``advantage_rows()``. Legacy trainer: taken from the batch's non-tensor columns; v1 trainer:
  fetched from TransferQueue by the batch's keys (``extra_fields`` of each row).
- the metrics functions it is given (the plugin gives ``extensions.metrics``'s ``longflow/`` ones),
  added to each training step's metrics (legacy
  ``compute_data_metrics``; v1 ``PPOTrainer._compute_metrics``) and to each validation's metrics
  (``_val_metrics_update`` of both trainers, from the reward's extra info).
- one weight-sync socket per trainer (``weight_ipc``): the Ray node id added to the job id in verl's
  ``/tmp/rl-colocate-zmq-*`` path, on both ends, so trainers side by side on one host never share it.
- the v1 replay buffer's poll (``replay_poll``): ``trainer.v1.sampler.sampler_kwargs.poll_interval_s``
  replaces verl's fixed 2 s, and ``last_sample_returned_at()`` says when the trainer took its last batch.
- the v1 trainer's padding rows (``padding_rows``): 2 tokens each when the actor (and a critic) train on FSDP, not
  verl's 128, or ``trainer.v1.padding_row_tokens``.
- the v1 actor update on the whole batch (``whole_batch``): ``trainer.v1.whole_batch_update`` pads a batch only to
  the data-parallel ranks and makes it one mini-batch.
"""

from __future__ import annotations

import logging
import os

import verl

logger = logging.getLogger(__name__)

TESTED_VERL = ("0.9.1",)
"""verl versions this seam was checked against (``tests/test_verl_compat.py``)."""


class VerlVersionError(RuntimeError):
    """The installed verl is not one the pack was tested with."""


def check_verl_version(installed: str | None = None) -> str:
    """Raise ``VerlVersionError`` unless ``installed`` (default: the installed verl) is tested."""
    installed = installed or verl.__version__
    if installed in TESTED_VERL:
        return installed
    message = (
        f"verl-longflow is tested with verl {', '.join(TESTED_VERL)}, but verl {installed} is installed. "
        f"Install a tested one (`pip install verl=={TESTED_VERL[-1]}`), or set LONGFLOW_ALLOW_UNTESTED_VERL=1 "
        "to try anyway and run `pytest tests/test_verl_compat.py` to see which reliances changed."
    )
    if os.environ.get("LONGFLOW_ALLOW_UNTESTED_VERL") == "1":
        logger.warning(message)
        return installed
    raise VerlVersionError(message)


check_verl_version()  # before anything below reads verl's internals

from extensions.verl_compat.padding_rows import FSDP_STRATEGIES, padding_row_tokens, uses_critic  # noqa: E402
from extensions.verl_compat.registries import (  # noqa: E402
    SYNTHETIC_SYSTEM,
    accept_mcp_tool_yaml,
    agent_loop_registry,
    build_assistant_message,
    cache_prefix_renders,
    capture_performance_metrics,
    install_interaction_alias,
    required_tool_name,
    rollout_replica_registry,
    tool_parser_registry,
)
from extensions.verl_compat.reliances import RELIANCES, Reliance, broken_reliances  # noqa: E402
from extensions.verl_compat.replay_poll import POLL_KEY, last_sample_returned_at, poll_interval  # noqa: E402
from extensions.verl_compat.trainer_hooks import (  # noqa: E402
    advantage_rows,
    batch_rows,
    extras_rows,
    install_trainer_hooks,
    installed_trainer_hooks,
)
from extensions.verl_compat.weight_ipc import install_weight_ipc_scope, installed_weight_ipc_scope  # noqa: E402
from extensions.verl_compat.whole_batch import whole_batch_update  # noqa: E402
from extensions.verl_compat.worker_hooks import (  # noqa: E402
    accept_segment_lists,
    segment_list_manager,
    segment_list_worker_class,
)

__all__ = [
    "FSDP_STRATEGIES",
    "install_weight_ipc_scope",
    "installed_weight_ipc_scope",
    "POLL_KEY",
    "RELIANCES",
    "SYNTHETIC_SYSTEM",
    "TESTED_VERL",
    "Reliance",
    "VerlVersionError",
    "accept_mcp_tool_yaml",
    "accept_segment_lists",
    "segment_list_manager",
    "segment_list_worker_class",
    "build_assistant_message",
    "capture_performance_metrics",
    "required_tool_name",
    "rollout_replica_registry",
    "advantage_rows",
    "agent_loop_registry",
    "batch_rows",
    "broken_reliances",
    "cache_prefix_renders",
    "check_verl_version",
    "extras_rows",
    "install_interaction_alias",
    "install_trainer_hooks",
    "installed_trainer_hooks",
    "last_sample_returned_at",
    "padding_row_tokens",
    "poll_interval",
    "tool_parser_registry",
    "uses_critic",
    "whole_batch_update",
]
