"""Every file under extensions/ that is not code (YAML presets and registries, chat templates, corpora) is declared in
pyproject.toml's package data, so a wheel install (not only an editable one) has it."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from setuptools.config.pyprojecttoml import load_file

from tests.conftest import ROOT

CODE_SUFFIXES = (".py", ".pyc")  # setuptools ships the modules; every other file must be declared


def declared(path: Path, package_data: dict[str, list[str]]) -> bool:
    """Whether setuptools ships ``path``: a pattern of its package (the nearest folder with ``__init__.py``) or of
    ``"*"`` (every package) matches its path under that package."""
    package_dir = next(p for p in path.parents if (p / "__init__.py").exists())
    package = ".".join(package_dir.relative_to(ROOT).parts)
    relative = path.relative_to(package_dir).as_posix()
    patterns = package_data.get(package, []) + package_data.get("*", [])
    # setuptools' "*.yaml" is a glob within the package folder: it does not reach into subfolders
    return any(fnmatch.fnmatch(relative, p) and relative.count("/") == p.count("/") for p in patterns)


def test_every_data_file_of_the_package_ships() -> None:
    package_data = load_file(ROOT / "pyproject.toml")["tool"]["setuptools"]["package-data"]
    files = [
        p
        for p in (ROOT / "extensions").rglob("*")
        if p.is_file() and p.suffix not in CODE_SUFFIXES and "__pycache__" not in p.parts
    ]
    assert ROOT / "extensions" / "presets" / "mode" / "colocate_async.yaml" in files
    assert [p.relative_to(ROOT).as_posix() for p in files if not declared(p, package_data)] == []


def test_a_file_in_a_subfolder_needs_its_own_pattern() -> None:
    nested = ROOT / "extensions" / "presets" / "mode" / "sync.yaml"
    assert not declared(nested, {"*": ["*.yaml"]})
    assert declared(nested, {"*": ["*.yaml"], "extensions.presets": ["mode/*.yaml"]})
