"""The seam to verl's internals: every reliance holds against the installed verl, the version check, the hooks."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import register_adv_est

from extensions import verl_compat
from extensions.verl_compat import RELIANCES, VerlVersionError, check_verl_version

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("reliance", RELIANCES, ids=[r.name for r in RELIANCES])
def test_reliance_holds_against_installed_verl(reliance):
    try:
        reliance.check()
    except Exception as exc:  # name the entry, loudly
        pytest.fail(f"verl reliance '{reliance.name}' ({reliance.mirrors}) broke: {type(exc).__name__}: {exc}")


def test_every_reliance_has_a_reason_and_a_verl_file():
    assert len({r.name for r in RELIANCES}) == len(RELIANCES) == 17
    assert all(r.reason and r.mirrors for r in RELIANCES)
    assert verl_compat.broken_reliances() == []


def test_a_broken_reliance_is_reported_by_name(monkeypatch):
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    async def renamed(self, data):  # what a verl release renaming a parameter looks like
        return None

    monkeypatch.setattr(ToolAgentLoop, "_handle_processing_tools_state", renamed)
    assert verl_compat.broken_reliances() == [
        "ToolAgentLoop handlers and AgentData (experimental/agent_loop/tool_agent_loop.py, "
        "experimental/agent_loop/agent_loop.py): AssertionError: "
        "ToolAgentLoop._handle_processing_tools_state signature changed"
    ]


def test_version_check_names_the_version_and_the_fix(monkeypatch):
    monkeypatch.delenv("LONGFLOW_ALLOW_UNTESTED_VERL", raising=False)
    assert check_verl_version() == "0.9.1"
    with pytest.raises(VerlVersionError) as err:
        check_verl_version("0.10.0")
    assert str(err.value) == (
        "verl-longflow is tested with verl 0.9.1, but verl 0.10.0 is installed. Install a tested one "
        "(`pip install verl==0.9.1`), or set LONGFLOW_ALLOW_UNTESTED_VERL=1 to try anyway and run "
        "`pytest tests/test_verl_compat.py` to see which reliances changed."
    )
    monkeypatch.setenv("LONGFLOW_ALLOW_UNTESTED_VERL", "1")
    assert check_verl_version("0.10.0") == "0.10.0"


PROBE: list = []


@register_adv_est("longflow_test_probe")
def _probe(token_level_rewards, response_mask, config=None, index=None, **kwargs):
    PROBE.append(verl_compat.advantage_rows())
    return torch.zeros_like(token_level_rewards), torch.zeros_like(token_level_rewards)


def _extras_column() -> np.ndarray:
    extras = np.empty(3, dtype=object)
    extras[:] = [
        {"turns": [], "termination_reason": "final_answer", "num_assistant_turns": 2, "num_tool_calls": 1},
        None,
        {"turns": [], "termination_reason": "error", "num_assistant_turns": 1},
    ]
    return extras


def test_legacy_trainer_publishes_each_rows_extras_while_estimating():
    from verl.trainer.config.algorithm import AlgoConfig
    from verl.trainer.ppo import ray_trainer

    assert "verl.trainer.ppo.ray_trainer" in verl_compat.installed_trainer_hooks()
    PROBE.clear()
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": torch.zeros(3, 4), "response_mask": torch.ones(3, 4, dtype=torch.int64)},
        non_tensors={"uid": np.array(["a", "a", "b"], dtype=object), "extras": _extras_column()},
    )
    ray_trainer.compute_advantage(batch, adv_estimator="longflow_test_probe", config=AlgoConfig())
    assert [[_extras_column()[0], None, _extras_column()[2]]] == PROBE
    assert verl_compat.advantage_rows() is None  # only while verl estimates


def test_legacy_trainer_metrics_gain_longflow_keys():
    from verl.trainer.ppo import ray_trainer

    metrics = ray_trainer.compute_data_metrics.__wrapped__  # verl's own, for the keys it makes
    assert callable(metrics)
    rows = verl_compat.extras_rows(_extras_column())
    from extensions.metrics import longflow_metrics

    got = longflow_metrics(rows)
    assert got["longflow/recorded_fraction"] == pytest.approx(2 / 3)
    assert got["longflow/termination/final_answer"] == 0.5 and got["longflow/termination/error"] == 0.5
    assert got["longflow/assistant_turns/mean"] == 1.5 and got["longflow/assistant_turns/max"] == 2.0
    assert got["longflow/tool_calls/mean"] == 0.5


def test_a_failing_rows_read_fails_the_advantage_step_and_a_failing_metric_does_not(caplog):
    from verl.trainer.ppo import ray_trainer

    from extensions.verl_compat import trainer_hooks

    PROBE.clear()
    broken = np.empty(2, dtype=object)
    broken[:] = [{"turns": []}, {"turns": []}]
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": torch.zeros(2, 3), "response_mask": torch.ones(2, 3, dtype=torch.int64)},
        non_tensors={"uid": np.array(["a", "a"], dtype=object), "extras": broken},
    )

    def explode(column):
        raise RuntimeError("verl moved the column")

    original = trainer_hooks.extras_rows
    trainer_hooks.extras_rows = explode
    try:
        with pytest.raises(trainer_hooks.RowsReadError) as err:
            ray_trainer.compute_advantage(batch, adv_estimator="longflow_test_probe", config=None)
        with caplog.at_level(logging.WARNING):
            assert trainer_hooks._guarded("longflow/ metrics", lambda: explode(None), {}) == {}
    finally:
        trainer_hooks.extras_rows = original
    assert PROBE == []  # the estimator asked for the rows and the step stopped there
    assert str(err.value) == (
        "verl-longflow: reading per-row records failed (RuntimeError: verl moved the column); the step stops rather "
        "than compute advantages without them (segment weights, turn credit, the error-rate check). Run "
        "`pytest tests/test_verl_compat.py` to see whether the installed verl changed."
    )
    assert (
        "verl-longflow: longflow/ metrics failed (RuntimeError: verl moved the column); training goes on "
        "without it. Run `pytest tests/test_verl_compat.py` to see whether the installed verl changed."
    ) in caplog.text


def test_rows_are_read_only_when_an_estimator_asks_and_only_once():
    reads = []

    def read():
        reads.append(1)
        return [None]

    with verl_compat.batch_rows(read):
        pass  # verl's own estimators never ask: nothing is fetched
    assert reads == []
    with verl_compat.batch_rows(read), verl_compat.batch_rows(None):  # None keeps the outer source
        assert verl_compat.advantage_rows() == [None] and verl_compat.advantage_rows() == [None]
    assert reads == [1] and verl_compat.advantage_rows() is None


# Files allowed to read verl's private names directly, each with its reason.
SEAM_EXCEPTIONS = {
    "tests/test_verl_compat.py": "tests the seam itself",
    "tests/trainer_harness.py": "subclasses the v1 worker's _agent_loop_postprocess to see what verl stores (reliance "
    "'v1 postprocessing')",
}
VERL_PRIVATE_NAMES = (
    "_agent_loop_registry",
    "_registry",
    "_performance_metrics",
    "_resolve_required_tool_name",
    "_SYNTHETIC_SYSTEM_MESSAGE",
    "_render_tokens",
    "_agent_loop_postprocess",
)


def test_no_private_verl_name_is_read_outside_the_seam():
    """verl's underscore names (``_agent_loop_registry``, ``ToolParser._registry``, ...) only in verl_compat/,
    across the product (extensions/, benchmarks/, scripts/, experiments/) and the tests."""
    import ast
    from pathlib import Path

    def reads_private_verl_names(tree: ast.AST) -> bool:
        verl_names = set()  # names bound by `from verl... import X` / `import verl...`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("verl"):
                if any(alias.name.startswith("_") for alias in node.names):
                    return True
                verl_names |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                verl_names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("verl")}
        for node in ast.walk(tree):
            name = getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "name", None)
            if name in VERL_PRIVATE_NAMES:
                return True
            if (  # X._private where X came from verl, e.g. ToolAgentLoop._build_assistant_message
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in verl_names
            ):
                return True
        return False

    assert reads_private_verl_names(ast.parse("names = ToolParser._registry"))
    assert not reads_private_verl_names(ast.parse('"""mentions ToolParser._registry in prose"""'))
    assert reads_private_verl_names(ast.parse("from verl.x import Loop\nLoop._build_assistant_message(1)"))
    root = Path(verl_compat.__file__).parents[2]
    folders = ("extensions", "benchmarks", "scripts", "experiments", "tests")
    files = [p for d in folders for p in sorted((root / d).rglob("*.py"))]
    assert len(files) > 150
    offenders = [
        rel
        for path in files
        if "verl_compat" not in path.parts
        and (rel := str(path.relative_to(root))) not in SEAM_EXCEPTIONS
        and reads_private_verl_names(ast.parse(path.read_text()))
    ]
    assert offenders == []


def _pack_imports(path: Path) -> set[str]:
    """The ``extensions.*`` modules a file imports, at any depth (lazy imports and TYPE_CHECKING included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("extensions"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.startswith("extensions")}
    return names


def test_the_seam_imports_no_feature_module():
    """verl_compat only wraps verl: the plugin passes the pack's functions in (hooks, alias, MCP loader)."""
    seam = ROOT / "extensions" / "verl_compat"
    for path in seam.glob("*.py"):
        outside = {m for m in _pack_imports(path) if not m.startswith("extensions.verl_compat")}
        assert outside == set(), f"{path.name} imports {sorted(outside)}"


def test_no_runtime_import_cycle_among_the_loop_modules():
    """context_budget -> episode -> tool_session -> context_budget was a cycle; metrics no longer imports episode."""
    assert "extensions.context_budget" not in _pack_imports(ROOT / "extensions" / "tool_session.py")
    assert "extensions.episode" not in _pack_imports(ROOT / "extensions" / "metrics.py")
