"""``LONGFLOW_HF_THREADS``: torch threads of the embedded backend (default: one fewer than the cores)."""

from __future__ import annotations

import os

import pytest

from extensions.backends.hf_server import THREADS_ENV, default_threads
from extensions.errors import ConfigError


@pytest.mark.parametrize("value", [None, ""])
def test_default_leaves_a_core_for_the_event_loop(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(THREADS_ENV, value)  # set but empty: the default
    assert default_threads() == max(1, len(os.sched_getaffinity(0)) - 1)


def test_the_variable_sets_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "2")
    assert default_threads() == 2


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_value_names_the_variable_and_what_is_valid(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(THREADS_ENV, value)
    with pytest.raises(ConfigError) as err:
        default_threads()
    assert str(err.value) == f"$LONGFLOW_HF_THREADS={value!r}: expected a whole number of torch threads, at least 1"
