"""docs/troubleshooting.md lists every config, sample and file error of the code (extensions/error_reference.py)."""

from __future__ import annotations

import inspect
import pkgutil
from importlib import import_module

import extensions
from extensions import error_reference as ref
from extensions.errors import LongflowError
from extensions.verl_compat import VerlVersionError


def test_the_generated_list_on_the_page_is_what_the_code_raises() -> None:
    page = ref.PAGE.read_text()
    assert ref.render(page) == page, "docs/troubleshooting.md is stale: run python -m extensions.error_reference"


def test_a_known_message_is_listed_with_its_placeholders() -> None:
    page = ref.PAGE.read_text()
    assert "| ConfigError | `algorithm.<SETTING>=<value> is not valid; choose one of <choices(MODES)>` |" in page
    assert "| problem | `agent loop <entry>: unknown key <key>; valid keys: <valid>` |" in page


def test_every_exception_type_of_the_pack_is_explained_on_the_page() -> None:
    """The hand-written table names each exception class; a new one must be added there."""
    page = ref.PAGE.read_text().partition(ref.BEGIN)[0]
    found = {VerlVersionError}
    for info in pkgutil.walk_packages(extensions.__path__, "extensions."):
        if info.name.endswith(("__main__", "example_server", "sandbox_child")):
            continue
        for obj in vars(import_module(info.name)).values():
            if inspect.isclass(obj) and issubclass(obj, LongflowError) and obj.__module__ == info.name:
                found.add(obj)
    missing = sorted(cls.__name__ for cls in found if f"`{cls.__name__}`" not in page)
    assert not missing, f"add these to the exception table of docs/troubleshooting.md: {missing}"


def test_every_module_that_raises_a_config_error_has_a_section() -> None:
    page = ref.PAGE.read_text()
    for path in sorted((ref.ROOT / "extensions").rglob("*.py")):
        rel = path.relative_to(ref.ROOT).as_posix()
        source = path.read_text()
        if "/testing/" in rel or rel.endswith("error_reference.py"):
            continue
        if any(f"raise {name}(f" in source or f'raise {name}("' in source for name in ref.ERRORS):
            assert f"### `{rel}`" in page, rel


def test_messages_keep_literal_text_and_mark_what_is_filled_in() -> None:
    source = 'def f(key, valid):\n    raise ConfigError(f"bad {key!r}; valid: {valid}" + " (fix it)")\n'
    assert list(ref.messages(source)) == [(2, "ConfigError", "bad <key>; valid: <valid> (fix it)")]
    checker = 'def g(where):\n    problems = []\n    problems.append(f"{where}: no")\n    return problems\n'
    assert list(ref.messages(checker)) == []
    assert list(ref.messages(checker, checker=True)) == [(3, "problem", "<where>: no")]
