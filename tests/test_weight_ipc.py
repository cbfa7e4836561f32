"""One weight-sync socket per trainer (extensions/verl_compat/weight_ipc.py).

verl's vLLM modules import vLLM, absent on CPU, so the receiver's address comes from verl's own
``_get_zmq_handle`` source run on its own, and the transfer is verl's own ``bucketed_weight_transfer``
(shared-memory mode) loaded from its file.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import verl

from extensions.verl_compat import weight_ipc

ROLLOUT = Path(verl.__file__).parent / "workers/rollout/vllm_rollout"


def verl_receiver_handle(environ: dict[str, str]) -> str:
    """verl's ``vLLMColocateWorkerExtension._get_zmq_handle`` (and the rank helper it calls), run as written."""
    tree = ast.parse((ROLLOUT / "utils.py").read_text())
    wanted = {"_resolve_vllm_weight_sync_local_rank", "_get_zmq_handle"}
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name in wanted]
    assert {node.name for node in found} == wanted
    namespace: dict[str, Any] = {"os": SimpleNamespace(environ=environ), "Any": Any}
    exec(compile(ast.Module(body=found, type_ignores=[]), "verl/utils.py", "exec"), namespace)
    worker = SimpleNamespace(local_rank=0, model_runner=None)
    return namespace["_get_zmq_handle"](worker)


class Server:
    """What ``vLLMHttpServer.__init__`` does with the job id (verl 0.9.1, vllm_async_server.py)."""

    def __init__(self, environ: dict[str, str], job_id: str) -> None:
        environ["VERL_REPLICA_RANK"] = "0"
        environ["VERL_RAY_JOB_ID"] = job_id


class Sender:
    """What ``ServerAdapter.__init__`` does with it (verl 0.9.1, vllm_rollout.py)."""

    def __init__(self, job_id: str, replica_rank: int = 0, local_rank: int = 0) -> None:
        self.zmq_handle = f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{replica_rank}-rank-{local_rank}.sock"


def test_scoped_handle_and_env_exact() -> None:
    handle = "ipc:///tmp/rl-colocate-zmq-01000000-replica-1-rank-3.sock"
    scoped = "ipc:///tmp/rl-colocate-zmq-01000000-ab12cd34ef56-replica-1-rank-3.sock"
    assert weight_ipc.scoped_handle(handle, "01000000", "ab12cd34ef56") == scoped
    assert weight_ipc.scoped_handle(scoped, "01000000", "ab12cd34ef56") == scoped  # once
    env = {"VERL_RAY_JOB_ID": "01000000"}
    assert weight_ipc.scope_receiver_env("ab12cd34ef56", env) == "01000000-ab12cd34ef56"
    assert weight_ipc.scope_receiver_env("ab12cd34ef56", env) == "01000000-ab12cd34ef56"
    with pytest.raises(ValueError) as error:
        weight_ipc.scoped_handle("ipc:///tmp/other.sock", "01000000", "ab12")
    assert str(error.value) == (
        "weight-sync socket 'ipc:///tmp/other.sock' does not start with "
        "'ipc:///tmp/rl-colocate-zmq-01000000-' (verl's layout changed)"
    )
    with pytest.raises(KeyError, match="VERL_RAY_JOB_ID is not set: vLLMHttpServer.__init__ no longer sets it"):
        weight_ipc.scope_receiver_env("ab12", {})


def _patched_pair(scope: str, environ: dict[str, str]) -> tuple[type, type]:
    class ScopedServer(Server):
        pass

    class ScopedSender(Sender):
        pass

    weight_ipc.scope_server_class(ScopedServer, scope=lambda: scope, environ=environ)
    weight_ipc.scope_server_class(ScopedServer, scope=lambda: scope, environ=environ)  # idempotent
    weight_ipc.scope_sender_class(ScopedSender, scope=lambda: scope, job_id=lambda: "01000000")
    weight_ipc.scope_sender_class(ScopedSender, scope=lambda: scope, job_id=lambda: "01000000")  # idempotent
    return ScopedServer, ScopedSender


def test_both_ends_agree_within_a_run_and_differ_across_runs() -> None:
    """Two runs on one host: same job id, different Ray nodes. Unpatched they share a socket; patched, each has its own."""
    env_a: dict[str, str] = {}
    env_b: dict[str, str] = {}
    Server(env_a, "01000000")
    Server(env_b, "01000000")
    shared = "ipc:///tmp/rl-colocate-zmq-01000000-replica-0-rank-0.sock"
    assert verl_receiver_handle(env_a) == verl_receiver_handle(env_b) == Sender("01000000").zmq_handle == shared

    handles = {}
    for run, scope in (("a", "aaaaaaaaaaaa"), ("b", "bbbbbbbbbbbb")):
        environ: dict[str, str] = {}
        server_cls, sender_cls = _patched_pair(scope, environ)
        server_cls(environ, "01000000")
        sender = sender_cls("01000000")
        assert sender.zmq_handle == verl_receiver_handle(environ)
        handles[run] = sender.zmq_handle
    assert handles == {
        "a": "ipc:///tmp/rl-colocate-zmq-01000000-aaaaaaaaaaaa-replica-0-rank-0.sock",
        "b": "ipc:///tmp/rl-colocate-zmq-01000000-bbbbbbbbbbbb-replica-0-rank-0.sock",
    }


def test_install_patches_verls_classes_by_module_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The post-import hooks find verl's classes under their real module names and patch them once."""
    server_module = SimpleNamespace(vLLMHttpServer=type("vLLMHttpServer", (Server,), {}))
    sender_module = SimpleNamespace(ServerAdapter=type("ServerAdapter", (Sender,), {}))
    monkeypatch.setitem(sys.modules, weight_ipc.SERVER_MODULE, server_module)
    monkeypatch.setitem(sys.modules, weight_ipc.SENDER_MODULE, sender_module)
    weight_ipc.install_weight_ipc_scope()  # the modules are "imported": wrapt runs the hooks now
    assert {weight_ipc.SERVER_MODULE, weight_ipc.SENDER_MODULE} <= set(weight_ipc.installed_weight_ipc_scope())
    for cls in (server_module.vLLMHttpServer, sender_module.ServerAdapter):
        assert cls.__init__._longflow_weight_ipc is True
        assert cls.__init__.__wrapped__ is cls.__mro__[1].__init__


TRANSFER = textwrap.dedent(
    """
    import asyncio, importlib.util, json, os, sys, threading, time
    import torch, verl
    spec = importlib.util.spec_from_file_location(
        "bwt", os.path.join(os.path.dirname(verl.__file__), "workers/rollout/vllm_rollout/bucketed_weight_transfer.py"))
    bwt = importlib.util.module_from_spec(spec); spec.loader.exec_module(bwt)

    class CPUDevice:  # the CUDA calls of verl's cleanup, on CPU
        def synchronize(self): pass
        def ipc_collect(self): pass
        def empty_cache(self): pass

    bwt.get_torch_device = CPUDevice
    handle_a, handle_b = sys.argv[1], sys.argv[2]

    def send(handle, value):
        sender = bwt.BucketedWeightSender(handle, bucket_size_mb=1, use_shm=True)
        weights = iter([("w", torch.full((4,), float(value)))])
        thread = threading.Thread(target=lambda: asyncio.run(sender.async_send_weights(weights)), daemon=True)
        thread.start()
        time.sleep(0.3)  # bound
        return thread

    sender_a = send(handle_a, 1)  # run A's trainer binds its socket
    sender_b = send(handle_b, 2)  # then run B's (the same path: A's file is removed, B's bound)
    received = []
    receiver = bwt.BucketedWeightReceiver(handle_a, device=torch.device("cpu"), use_shm=True)  # run A's vLLM
    thread = threading.Thread(
        target=lambda: receiver.receive_weights(
            on_bucket_received=lambda weights, last: received.extend(t.tolist() for _, t in weights)),
        daemon=True)
    thread.start(); thread.join(10)
    sender_a.join(2)
    print(json.dumps({"a_received": received, "a_sender_waiting": sender_a.is_alive()}), flush=True)
    os._exit(0)  # a sender left waiting keeps zmq's context open
    """
)


def _transfer(handle_a: str, handle_b: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", TRANSFER, handle_a, handle_b], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_verls_transfer_crosses_runs_on_a_shared_path_and_not_on_scoped_ones() -> None:
    """verl's real sender and receiver: with one path, run A's engine gets run B's weights and A's trainer waits."""
    shared = f"ipc:///tmp/rl-colocate-zmq-01000000-test{os.getpid()}-replica-0-rank-0.sock"
    assert _transfer(shared, shared) == {"a_received": [[2.0, 2.0, 2.0, 2.0]], "a_sender_waiting": True}
    scoped_a = weight_ipc.scoped_handle(shared, f"01000000-test{os.getpid()}", "aaaaaaaaaaaa")
    scoped_b = weight_ipc.scoped_handle(shared, f"01000000-test{os.getpid()}", "bbbbbbbbbbbb")
    assert _transfer(scoped_a, scoped_b) == {"a_received": [[1.0, 1.0, 1.0, 1.0]], "a_sender_waiting": False}


CLUSTER = textwrap.dedent(
    """
    import json, ray
    from extensions.verl_compat import weight_ipc
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    print(json.dumps({"job": ray.get_runtime_context().get_job_id(), "scope": weight_ipc.node_scope()}), flush=True)
    ray.shutdown()
    """
)


def test_two_local_ray_clusters_share_the_job_id_not_the_scope() -> None:
    """What happens when two main_ppo start side by side: each its own Ray cluster, both job 01000000."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    runs = [
        subprocess.Popen([sys.executable, "-c", CLUSTER], stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    results = [json.loads(run.communicate(timeout=180)[0].strip().splitlines()[-1]) for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert results[0]["job"] == results[1]["job"] == "01000000"
    assert len(results[0]["scope"]) == len(results[1]["scope"]) == 12
    assert results[0]["scope"] != results[1]["scope"]
