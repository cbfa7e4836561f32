"""Where a run's pieces go: the rollout replica's GPUs, and what every node of a cluster must reach.

Two checks of a composed config, run by ``config_check`` before anything starts:

- ``check_rollout_size``: one rollout replica takes tensor x data x pipeline parallel GPUs, which must divide the
  trainer's (verl's ``validate_config`` does not check it, and its default tensor parallel size is 2).
- ``check_nodes``: on several nodes (``trainer.nnodes`` > 1, or ``separate_async`` with ``rollout.nnodes`` > 1),
  verl places its agent-loop workers on any node, and the pack's tools and users run inside them. An endpoint in
  the run's tool, MCP-server or interaction files at a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``,
  ``0.0.0.0``) is reachable from one node only: every sample of the other nodes' workers would fail to reach it.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

Resolve = Callable[[str], "Path | None"]
"""``config_check.resolve``: an existing file for a path as written in a config, or None."""


def replica_sizes(rollout: Any) -> dict[str, int]:
    """The factors of the GPUs one rollout replica takes (verl's LLMServerManager multiplies them)."""
    keys = ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")
    return {k: int(rollout.get(k) or 1) for k in keys}


def check_rollout_size(cfg: Any, where: str) -> list[str]:
    """One rollout replica needs tensor x data x pipeline parallel GPUs; verl's validate_config does not check
    that the trainer has them (verl's default tensor_model_parallel_size is 2: on one GPU no server starts)."""
    rollout = cfg.actor_rollout_ref.rollout
    sizes, pool = replica_sizes(rollout), "trainer"
    if ((cfg.trainer.get("v1") or {}).get("trainer_mode")) == "separate_async":
        pool = "actor_rollout_ref.rollout"  # the replicas run on the rollout's own GPUs
    owner = rollout if pool != "trainer" else cfg.trainer
    need, gpus = math.prod(sizes.values()), int(owner.get("n_gpus_per_node") or 0) * int(owner.get("nnodes") or 0)
    if gpus < 1 or gpus % need == 0:
        return []
    detail = " x ".join(f"actor_rollout_ref.rollout.{k}={v}" for k, v in sizes.items())
    return [
        f"{where}: one rollout replica needs {detail} = {need} GPUs, which does not divide {pool}.n_gpus_per_node "
        f"x {pool}.nnodes = {gpus}; set actor_rollout_ref.rollout.tensor_model_parallel_size=1 on one GPU"
    ]


def node_span(cfg: Any) -> str | None:
    """The setting that puts the run on several nodes (``trainer.nnodes=2``, say), or None on one node."""
    trainer_nodes = int(cfg.trainer.get("nnodes") or 1)
    mode = ((cfg.trainer.get("v1") or {}).get("trainer_mode")) or "sync"
    rollout_nodes = int(cfg.actor_rollout_ref.rollout.get("nnodes") or 1)
    span = None  # a setting, not a problem: check_nodes words the problem
    if trainer_nodes > 1:
        span = f"trainer.nnodes={trainer_nodes}"
    elif mode == "separate_async" and rollout_nodes > 1:
        span = f"actor_rollout_ref.rollout.nnodes={rollout_nodes} (separate_async)"
    return span


def check_nodes(cfg: Any, where: str, loops: Mapping[str, Mapping[str, Any]], resolve: Resolve) -> list[str]:
    """On several nodes: every loopback endpoint of the run's tool and interaction files (and the MCP-server files
    they name), each named by file and key. ``loops``: the agent-loop entries by name (their interaction files)."""
    span = node_span(cfg)
    if span is None:
        return []
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    paths = [multi_turn.get("tool_config_path"), multi_turn.get("interaction_config_path")]
    paths += [entry.get("interaction_config_path") for entry in loops.values()]
    problems, seen = [], set()
    for path in paths:
        file = resolve(str(path)) if path else None
        if file is None or file.resolve() in seen:
            continue  # a missing file is reported where the path is checked
        seen.add(file.resolve())
        for named, key, url in loopback_endpoints(file, resolve):
            problems.append(
                f"{where}: {named}: {key}={url!r} is a loopback address, but {span} puts agent-loop workers on "
                "other nodes, which cannot reach it; give an address every node can reach (this host's name or IP)"
            )
    return problems


def loopback_endpoints(file: Path, resolve: Resolve) -> Iterator[tuple[Path, str, str]]:
    """``(file, key, url)`` of every loopback URL in ``file`` and in the JSON/YAML files its ``*_config_path``
    values name (an MCP tool's servers file)."""
    data = _load(file)
    for key, value in _strings(data, ""):
        if _is_loopback_url(value):
            yield file, key, value
        elif key.endswith("_config_path") and (named := resolve(value)) is not None:
            for inner_key, inner in _strings(_load(named), ""):
                if _is_loopback_url(inner):
                    yield named, inner_key, inner


def _load(file: Path) -> Any:
    try:
        text = file.read_text()
        return json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError):
        return None  # an unreadable file is reported by the file's own check


def _strings(data: Any, key: str) -> Iterator[tuple[str, str]]:
    """``(dotted key, value)`` of every string in nested dicts and lists (``tools[0].config.url``); a mapping with
    ``disabled: true`` (an MCP server switched off) is left out."""
    if isinstance(data, str):
        yield key, data
    elif isinstance(data, Mapping):
        if data.get("disabled") is True:
            return
        for k, v in data.items():
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _strings(v, f"{key}[{i}]")


def _is_loopback_url(value: str) -> bool:
    """A URL of any scheme (``http://``, ``grpc://``, ...) whose host is this machine's loopback or unspecified
    address. A malformed URL is not one (the file's own check reports it)."""
    try:
        parts = urlsplit(value.strip())
        host = (parts.hostname or "").rstrip(".") if parts.scheme and parts.netloc else ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return any(a is not None and (a.is_loopback or a.is_unspecified) for a in (address, mapped))
