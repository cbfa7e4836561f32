"""pyproject.toml: an SPDX licence string, so ``pip install -e .`` prints no setuptools deprecation.

setuptools applies ``[project]`` in ``setuptools.config.pyprojecttoml.apply_configuration``, which is where
``pip install`` hits the deprecation of ``license = { text = ... }``; the tests call it directly.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from setuptools.config.pyprojecttoml import apply_configuration, load_file
from setuptools.dist import Distribution
from setuptools.warnings import SetuptoolsDeprecationWarning

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_applies_without_any_setuptools_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert dist.metadata.license_expression == "Apache-2.0"
    build = load_file(ROOT / "pyproject.toml")["build-system"]
    assert build["requires"] == ["setuptools>=77"]  # the first setuptools with SPDX license strings


def test_the_old_license_table_is_what_setuptools_deprecates(tmp_path: Path) -> None:
    text = (ROOT / "pyproject.toml").read_text().replace('license = "Apache-2.0"', 'license = { text = "Apache-2.0" }')
    (tmp_path / "pyproject.toml").write_text(text)
    (tmp_path / "README.md").write_text("x\n")
    with pytest.warns(SetuptoolsDeprecationWarning, match="`project.license` as a TOML table is deprecated"):
        apply_configuration(Distribution(), tmp_path / "pyproject.toml")
