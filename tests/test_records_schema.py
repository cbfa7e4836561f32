"""One record schema: the loop writes, and the reward and metrics read, exactly the keys of records_schema."""

from __future__ import annotations

import ast
from pathlib import Path

from extensions import metrics
from extensions.custom_rewards import REWARD_KEYS
from extensions.episode import Episode
from extensions.records_schema import COUNTS, TERMINATION_REASONS, Extras, Reason
from extensions.rewards.trajectory import TrajectoryPieces

ROOT = Path(__file__).resolve().parents[1]


def test_the_episode_writes_every_schema_key_and_no_other():
    extras = Episode(messages=[{"role": "user", "content": "x"}], request_id="r", tools_kwargs={}).extras("lw")
    assert list(extras) == [*list(Extras.__annotations__)[:4], *COUNTS, *list(Extras.__annotations__)[4:]]
    assert extras["termination_reason"] == "error" and all(extras[key] == 0 for key in COUNTS)


def test_reward_metrics_and_pieces_read_the_same_counts_and_reasons():
    assert set(COUNTS) <= set(REWARD_KEYS)
    assert {f"term_{r}" for r in TERMINATION_REASONS} <= set(REWARD_KEYS)
    assert sorted(metrics.COUNTS.values()) == sorted(COUNTS)
    assert set(COUNTS) <= set(TrajectoryPieces.__dataclass_fields__)
    assert tuple(r.value for r in Reason) == TERMINATION_REASONS


def test_the_schema_module_imports_no_verl_and_no_other_pack_module():
    tree = ast.parse((ROOT / "extensions" / "records_schema.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"__future__", "enum", "typing"}


def test_no_copy_of_the_termination_reasons_is_left():
    for path in (ROOT / "extensions").rglob("*.py"):
        if path.name != "records_schema.py":
            text = path.read_text()
            assert '"max_user_turns",\n' not in text, f"{path} lists the termination reasons again"
