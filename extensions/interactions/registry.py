"""Load interactions from verl <= 0.7's YAML format.

    interaction:
      - name: code_verify                        # optional; defaults from the class name
        class_name: extensions.interactions.code_verify.CodeVerifyInteraction
        config: {max_rounds: 1}

Each sample picks one by ``interaction_kwargs.name``. Files are loaded once per process
and cached, since verl builds a new agent loop object for every sample.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from extensions.errors import ConfigError, choices
from extensions.interactions.base import BaseInteraction, DuckInteraction

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
ENTRY_KEYS = {"name", "class_name", "config"}


def resolve_path(path: str | Path) -> Path:
    """Resolve a config path: absolute, then the working directory, then the pack's checkout."""
    candidate = Path(path)
    for option in (candidate, Path.cwd() / candidate, PACKAGE_ROOT / candidate):
        if option.is_file():
            return option.resolve()
    raise ConfigError(f"interaction config {str(path)!r} not found (looked in cwd and {PACKAGE_ROOT})")


def import_class(dotted: str, *, where: str) -> type:
    """Import ``pkg.mod.Class``; the error names ``where`` it was asked for."""
    module_name, _, class_name = dotted.rpartition(".")
    if not module_name:
        raise ConfigError(f"{where}: {dotted!r} is not a dotted path like 'package.module.Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module_name!r}: {exc}") from exc
    if not hasattr(module, class_name):
        raise ConfigError(f"{where}: module {module_name!r} has no attribute {class_name!r}")
    return getattr(module, class_name)


def default_name(class_name: str) -> str:
    """verl 0.7's rule: 'Gsm8kInteraction' -> 'gsm8k'."""
    simple = class_name.rsplit(".", 1)[-1]
    return (simple[: -len("Interaction")] if simple.endswith("Interaction") else simple).lower()


def build_interactions(entries: Any, *, source: str) -> dict[str, BaseInteraction]:
    """Instantiate every entry of an ``interaction:`` list; all errors are reported together."""
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: top-level key 'interaction' must be a list of entries")
    interactions: dict[str, BaseInteraction] = {}
    problems: list[str] = []
    for index, entry in enumerate(entries):
        where = f"{source}: interaction[{index}]"
        try:
            name, interaction = _build_entry(entry, where)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        if name in interactions:
            problems.append(f"{where}: duplicate interaction name {name!r}")
        interactions[name] = interaction
    if problems:
        raise ConfigError("\n".join(problems))
    return interactions


def _build_entry(entry: Any, where: str) -> tuple[str, BaseInteraction]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {choices(ENTRY_KEYS)}")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {choices(unknown)}; valid keys: {choices(ENTRY_KEYS)}")
    if not isinstance(entry.get("class_name"), str):
        raise ConfigError(f"{where}: 'class_name' is required and must be a dotted class path")
    config = dict(entry.get("config") or {})
    name = entry.get("name") or default_name(entry["class_name"])
    config["name"] = name
    cls = import_class(entry["class_name"], where=f"{where}.class_name")
    if not (isinstance(cls, type) and issubclass(cls, BaseInteraction)) and not _is_duck_interaction(cls):
        raise ConfigError(f"{where}.class_name: {entry['class_name']!r} is not a BaseInteraction subclass")
    try:
        interaction = cls(config=config)
        return name, interaction if isinstance(interaction, BaseInteraction) else DuckInteraction(interaction)
    except (ValueError, KeyError) as exc:  # ConfigError is a ValueError
        raise ConfigError(f"{where}.config: {exc}") from exc
    except TypeError as exc:
        raise ConfigError(f"{where}.config: {entry['class_name']} rejected its config: {exc}") from exc


def _is_duck_interaction(cls: Any) -> bool:
    """verl 0.7 classes subclass verl's own (now missing) BaseInteraction; accept the same methods."""
    needed = ("start_interaction", "generate_response", "finalize_interaction")
    return isinstance(cls, type) and all(callable(getattr(cls, m, None)) for m in needed)


@lru_cache(maxsize=32)
def load_interactions(path: str) -> dict[str, BaseInteraction]:
    """Load (once per process) the interactions declared in a YAML file."""
    resolved = resolve_path(path)
    try:
        data = yaml.safe_load(resolved.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{resolved}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or "interaction" not in data:
        raise ConfigError(f"{resolved}: expected a top-level 'interaction:' list")
    return build_interactions(data["interaction"], source=str(resolved))
