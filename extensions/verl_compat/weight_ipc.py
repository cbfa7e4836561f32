"""One weight-sync socket per trainer, also when several trainers share a host.

verl 0.9.1 moves new weights from a trainer rank to its colocated vLLM engine over a ZMQ IPC socket,
``ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{r}-rank-{k}.sock``: the sender (``ServerAdapter`` in the
trainer's worker) takes ``job_id`` from Ray, the receiver (verl's vLLM worker extension, in a vLLM
subprocess) reads it from ``VERL_RAY_JOB_ID``, which ``vLLMHttpServer.__init__`` sets. The job id was
meant to keep concurrent jobs apart (verl PR #6246), but every ``main_ppo`` starts its own local Ray
cluster and every cluster numbers its first job ``01000000``: two trainers side by side on one host
(one per GPU, say) get the same path. The sender removes and re-binds the path at every sync, so a
receiver can reach the other run's sender: seen on a 4-GPU machine as a ``TypeError: 'str' object is
not callable`` in ``rebuild_ipc`` and as a trainer waiting forever (docs/results/gsm8k-tools-ab-2seed-h200x4).

``install_weight_ipc_scope()`` adds the Ray node id (random per Ray node, so per cluster on a host) to
the job id on both sides: after ``vLLMHttpServer.__init__`` the environment's ``VERL_RAY_JOB_ID``
becomes ``{job_id}-{node}`` (its vLLM workers inherit it), and after ``ServerAdapter.__init__`` the
sender's ``zmq_handle`` gets the same ``{job_id}-{node}``. Sender and receiver of one rank share a
node (the socket is a file), so they agree; two clusters never do. Applied lazily through ``wrapt``'s
post-import hooks, since both modules import vLLM.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import wrapt

SERVER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_async_server"
SENDER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_rollout"
JOB_ENV = "VERL_RAY_JOB_ID"
SOCKET_PREFIX = "ipc:///tmp/rl-colocate-zmq-"
_INSTALLED: set[str] = set()


def node_scope() -> str:
    """This process's Ray node id, shortened: unique to one Ray node, shared by its workers."""
    import ray

    return ray.get_runtime_context().get_node_id()[:12]


def scoped_job_id(job_id: str, scope: str) -> str:
    """``job_id`` with ``scope`` appended, once."""
    suffix = f"-{scope}"
    return job_id if job_id.endswith(suffix) else job_id + suffix


def scoped_handle(handle: str, job_id: str, scope: str) -> str:
    """The sender's socket address with the same scoped job id as the receiver's.

    Raises ``ValueError`` for an address that does not start the way verl 0.9.1 writes it: a sender
    left unscoped would wait forever for a receiver that listens elsewhere.
    """
    prefix = f"{SOCKET_PREFIX}{job_id}-"
    scoped = f"{SOCKET_PREFIX}{scoped_job_id(job_id, scope)}-"
    if handle.startswith(scoped):
        return handle
    if not handle.startswith(prefix):
        raise ValueError(f"weight-sync socket {handle!r} does not start with {prefix!r} (verl's layout changed)")
    return scoped + handle[len(prefix) :]


def scope_receiver_env(scope: str, environ: dict[str, str] | Any = os.environ) -> str:
    """Scope ``VERL_RAY_JOB_ID`` in ``environ`` (set by ``vLLMHttpServer.__init__``); returns the new value."""
    if JOB_ENV not in environ:
        raise KeyError(f"{JOB_ENV} is not set: vLLMHttpServer.__init__ no longer sets it (verl's layout changed)")
    environ[JOB_ENV] = scoped_job_id(environ[JOB_ENV], scope)
    return environ[JOB_ENV]


def _after_init(cls: type, then: Callable[[Any], None]) -> None:
    original = cls.__init__
    if getattr(original, "_longflow_weight_ipc", False):
        return

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        then(self)

    __init__._longflow_weight_ipc = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def scope_server_class(cls: type, scope: Callable[[], str] = node_scope, environ: Any = os.environ) -> None:
    """Make ``cls.__init__`` (verl's ``vLLMHttpServer``) scope ``VERL_RAY_JOB_ID`` after it sets it."""
    _after_init(cls, lambda _server: scope_receiver_env(scope(), environ))


def scope_sender_class(
    cls: type, scope: Callable[[], str] = node_scope, job_id: Callable[[], str] | None = None
) -> None:
    """Make ``cls.__init__`` (verl's ``ServerAdapter``) scope its ``zmq_handle``."""

    def ray_job_id() -> str:
        import ray

        return ray.get_runtime_context().get_job_id()

    current_job = job_id or ray_job_id

    def then(adapter: Any) -> None:
        adapter.zmq_handle = scoped_handle(adapter.zmq_handle, current_job(), scope())
        print(f"[longflow] weight-sync socket: {adapter.zmq_handle}", file=sys.stderr, flush=True)  # once a rank

    _after_init(cls, then)


def install_weight_ipc_scope() -> None:
    """Scope both ends of the weight-sync socket when verl's vLLM modules are imported (now, if they are)."""

    def server(module: Any) -> None:
        scope_server_class(module.vLLMHttpServer)
        _INSTALLED.add(SERVER_MODULE)

    def sender(module: Any) -> None:
        scope_sender_class(module.ServerAdapter)
        _INSTALLED.add(SENDER_MODULE)

    wrapt.register_post_import_hook(server, SERVER_MODULE)
    wrapt.register_post_import_hook(sender, SENDER_MODULE)


def installed_weight_ipc_scope() -> list[str]:
    """verl modules whose weight-sync socket is scoped so far in this process."""
    return sorted(_INSTALLED)
