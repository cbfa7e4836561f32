"""docs/reference/configuration.md is generated from the code (extensions/config_reference.py) and must match it."""

from __future__ import annotations

import inspect
import pkgutil
from importlib import import_module

import pytest
from pydantic import BaseModel

import extensions
from extensions import config_reference as ref


@pytest.fixture(scope="module")
def page() -> str:
    return ref.render()


def test_the_committed_page_is_what_the_code_generates(page: str) -> None:
    committed = ref.PAGE.read_text()
    assert committed == page, "docs/reference/configuration.md is stale: run python -m extensions.config_reference"


def test_check_exits_1_with_a_diff_on_a_stale_page(tmp_path, capsys) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(ref.PAGE.read_text().replace("Most assistant turns", "Fewest assistant turns"))
    assert ref.main(["--check", "--page", str(stale)]) == 1
    out = capsys.readouterr().out
    assert "-| `max_assistant_turns` | `int`, ≥ 1 | `15` | Fewest assistant turns" in out
    assert "is stale: run python -m extensions.config_reference" in out
    assert ref.main(["--page", str(stale)]) == 0 and ref.main(["--check", "--page", str(stale)]) == 0


def test_a_known_setting_has_its_name_type_default_and_docstring(page: str) -> None:
    assert (
        "| `tool_timeout_s` | `float`, > 0 | `30.0` | Per-call tool timeout; the call is cancelled and the model is told. |"
        in page.splitlines()
    )
    assert (
        "| `max_parallel_calls` | `int` or `None`, ≥ 1 | `null` | Most tool calls run per assistant turn; None uses "
        "verl's multi_turn.max_parallel_calls. |" in page.splitlines()
    )


def test_every_field_of_every_settings_model_is_on_the_page(page: str) -> None:
    for section in ref.SECTIONS:
        model = ref.load(section.model)
        for name in model.model_fields:
            if name not in section.hidden:
                assert f"| `{name}` |" in page, f"{section.model}.{name}"


def test_every_config_model_of_the_pack_has_a_section() -> None:
    """A new settings model (a pydantic model that forbids extra keys and is named *Settings/*Config/*Limits/*Spec)
    must be added to SECTIONS, or the reference silently misses it."""
    listed = {section.model for section in ref.SECTIONS}
    found = set()
    for info in pkgutil.walk_packages(extensions.__path__, "extensions."):
        if ".testing" in info.name or info.name.endswith(("__main__", "example_server", "sandbox_child")):
            continue
        module = import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseModel)
                and obj.__module__ == info.name
                and obj.model_config.get("extra") == "forbid"
                and name.endswith(("Settings", "Config", "Limits", "Spec"))
            ):
                found.add(f"{info.name}.{name}")
    covered = {f for f in found if f in listed or any(issubclass(ref.load(m), ref.load(f)) for m in listed)}
    assert found == covered, sorted(found - covered)  # a listed subclass (PythonExecConfig) shows its base's keys


def test_every_interaction_key_the_constructor_accepts_is_listed(page: str) -> None:
    for dotted in ref.INTERACTIONS:
        cls = ref.load(dotted)
        module = import_module(cls.__module__)
        section = page.split(f"### `{dotted}`", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
        for key in set(module.CONFIG_KEYS) - {"name"}:
            assert f"| `{key}` |" in section, f"{dotted}: {key}"


def test_defaults_shown_are_the_code_defaults(page: str) -> None:
    from extensions.folding import FoldSettings
    from extensions.rewards.settings import RewardSettings

    assert f"| `max_segments` | `int`, ≥ 2 | `{FoldSettings().max_segments}` |" in page
    assert f"| `mode` | `'strict'` or `'flexible'` | `\"{RewardSettings().mode}\"` |" in page
    assert FoldSettings().instruction in page  # a long default is shown below its table
