"""Bad config and bad samples: clear errors at construction, error trajectories at run time."""

from __future__ import annotations

import textwrap

import pytest

from extensions.errors import ConfigError
from extensions.interactions.registry import load_interactions
from extensions.loop_settings import parse_settings
from tests.conftest import Row, register_loop, run_batch, sample
from tests.fixtures import interactions as fixture_interactions


async def test_unknown_agent_name_lists_registered_loops(worker):
    with pytest.raises(AssertionError, match=r"Agent loop nope not registered.*long_workflow"):
        await run_batch(worker, {"X": ["a"]}, [sample("X", "nope")])


def test_unknown_yaml_key_names_entry_and_valid_keys():
    with pytest.raises(ConfigError) as err:
        parse_settings({"max_turns": 3, "max_user_turns": "3"}, entry="my_loop")
    lines = sorted(str(err.value).splitlines())
    assert lines[0] == "agent loop 'my_loop': key 'max_user_turns': Input should be a valid integer (got '3')"
    assert lines[1].startswith("agent loop 'my_loop': unknown key 'max_turns'; valid keys: 'catch_errors', ")


async def test_bad_yaml_entry_fails_at_construction(worker):
    loop = register_loop("lw_badkey", max_turns=3)
    with pytest.raises(Exception, match="agent loop 'lw_badkey': unknown key 'max_turns'") as err:
        await run_batch(worker, {"B": ["a"]}, [sample("B", loop)])
    assert isinstance(err.value.__cause__, ConfigError)  # hydra wraps what the constructor raised


async def test_bad_samples_are_error_trajectories_batch_survives(worker):
    strict = register_loop("lw_strict", require_interaction=True)
    plain = register_loop("lw_plain")
    script = {"G-ok": ["fine"], "G-noname": ["x"], "G-badname": ["x"], "G-raises": ["4"]}
    samples = [
        sample("G-ok", plain),
        sample("G-noname", strict),
        sample("G-badname", plain, interaction_kwargs={"name": "nosuch"}),
        sample("G-raises", plain, interaction_kwargs={"name": "raising"}),
    ]
    fixture_interactions.FINALIZED.clear()
    out = await run_batch(worker, script, samples)
    rows = [Row(out, i) for i in range(4)]
    assert [r.reason for r in rows] == ["final_answer", "error", "error", "error"]
    assert rows[1].extras["error"] == (
        "SampleError: sample 1: agent loop 'lw_strict' requires interaction_kwargs.name "
        "(one of 'raising', 'scripted'), but the sample has none"
    )
    assert (
        rows[2].extras["error"].startswith("SampleError: sample 2: interaction_kwargs.name='nosuch' is not defined in ")
    )
    assert rows[2].extras["error"].endswith("valid names: 'raising', 'scripted'")
    assert rows[3].extras["error"] == "RuntimeError: interaction exploded"
    assert len(fixture_interactions.FINALIZED) == 1  # finalize ran despite the error
    assert rows[0].mask == [1] * len(rows[0].mask)


async def test_catch_errors_false_fails_the_batch(worker):
    loop = register_loop("lw_raise", catch_errors=False, require_interaction=True)
    with pytest.raises(Exception, match="requires interaction_kwargs.name"):
        await run_batch(worker, {"H": ["x"]}, [sample("H", loop)])


def test_interaction_yaml_errors_reported_together(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        textwrap.dedent(
            """
            interaction:
              - name: a
                class_name: extensions.interactions.scripted.ScriptedInteraction
                colour: red
              - name: b
                class_name: extensions.interactions.nosuch.Thing
              - class_name: extensions.interactions.scripted.ScriptedInteraction
                config: {messages: "not a list"}
            """
        )
    )
    with pytest.raises(ConfigError) as err:
        load_interactions(str(path))
    lines = str(err.value).splitlines()
    assert lines[0] == f"{path}: interaction[0]: unknown key(s) 'colour'; valid keys: 'class_name', 'config', 'name'"
    assert lines[1].startswith(
        f"{path}: interaction[1].class_name: cannot import module 'extensions.interactions.nosuch'"
    )
    assert lines[2] == f"{path}: interaction[2].config: config.messages must be a list of strings, got str"


def test_verl07_interaction_class_drops_in(tmp_path, monkeypatch):
    import extensions.plugin  # noqa: F401  (installs the verl.interactions.base alias)

    module = tmp_path / "legacy_interaction.py"
    module.write_text(
        textwrap.dedent(
            """
            from verl.interactions.base import BaseInteraction

            class Gsm8kInteraction(BaseInteraction):
                async def generate_response(self, instance_id, messages, **kwargs):
                    return True, "ok", 1.0, {}
            """
        )
    )
    config = tmp_path / "legacy.yaml"
    config.write_text("interaction:\n  - class_name: legacy_interaction.Gsm8kInteraction\n    config: {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    interactions = load_interactions(str(config))
    assert list(interactions) == ["gsm8k"] and interactions["gsm8k"].name == "gsm8k"


async def test_unknown_tool_parser_names_the_registered_ones(worker):
    loop = register_loop("lw_badparser", tool_parser="yaml")
    with pytest.raises(
        Exception, match=r"agent loop 'lw_badparser': tool_parser 'yaml' is not registered; valid: .*'auto'"
    ):
        await run_batch(worker, {"BP": ["a"]}, [sample("BP", loop)])
