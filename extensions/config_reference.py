"""The configuration reference (``docs/reference/configuration.md``), generated from the code.

    python -m extensions.config_reference           # write the page
    python -m extensions.config_reference --check   # exit 1 with a diff when the page is stale (CI, tests)

Every setting's name, type, default and docstring comes from the settings models themselves
(``LoopSettings``, ``CodeFenceSettings``, ``FoldSettings``, ``RewardSettings``, the tools' config
models), from the ``algorithm.*`` keys' parsers, from the interactions' constructors and from the
registries the plugin fills. Only the sentence that says where each block of settings goes in a
config is written here. Exit status: 0 when the page was written or is up to date, 1 when stale.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from extensions.config_reference_sections import INTERACTIONS, SECTIONS, Section  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "configuration.md"
LONG_DEFAULT = 60
"""A default longer than this many characters is shown below its table instead of in it."""


def load(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def md(text: str) -> str:
    """Docstring text as one Markdown table cell: RST ``code`` to Markdown, lines joined, pipes escaped."""
    text = " ".join(inspect.cleandoc(text).split())
    return re.sub(r"``([^`]+?)``", r"`\1`", text).replace("|", "\\|")


def type_name(tp: Any) -> str:
    """A type as Python writes it, e.g. ``int | None``, ``list[str]``, ``Literal['worker', 'trajectory']``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{name}[{inner}]" if args else name
    return getattr(tp, "__name__", str(tp))


def type_cell(tp: Any) -> str:
    """A type for a table cell: each alternative of a union or literal in its own code span, joined by "or" (a
    pipe would split the cell on GitHub, and an escaped one shows its backslash on the site)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return " or ".join(f"`{a!r}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_cell(a) for a in args)
    return f"`{type_name(tp)}`"


CONSTRAINTS = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", "≥ {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "≤ {}"),
    (annotated_types.MinLen, "min_length", "at least {} item(s)"),
)


def constraints(metadata: list[Any]) -> list[str]:
    return [text.format(getattr(m, attr)) for m in metadata for kind, attr, text in CONSTRAINTS if isinstance(m, kind)]


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The string literal under each annotated attribute of ``cls``'s class body (PEP 257 attribute docstrings)."""
    source = textwrap.dedent(inspect.getsource(cls))
    body = ast.parse(source).body[0].body
    docs = {}
    for stmt, after in zip(body, body[1:], strict=False):
        named = isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        if named and isinstance(after, ast.Expr) and isinstance(getattr(after.value, "value", None), str):
            # as written in the source, so that an escape such as \n reads as written
            docs[stmt.target.id] = (ast.get_source_segment(source, after.value) or "").strip("\"'")
    return docs


def show(value: Any) -> str:
    """A default as it would be written in YAML/JSON (null, true, "text", [...])."""
    if isinstance(value, tuple):
        value = list(value)
    if hasattr(value, "model_dump"):  # a nested settings block: its defaults, as YAML would write them
        value = value.model_dump()
    return json.dumps(value, ensure_ascii=False)


def row(name: str, type_text: str, default: str, doc: str) -> str:
    return f"| `{name}` | {type_text} | {default} | {doc} |"


def field_rows(model: type[BaseModel], hidden: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(table rows, long defaults shown under the table) of every field of ``model``."""
    docs = attribute_docstrings(model)
    rows, below = [], []
    for name, field in model.model_fields.items():
        if name in hidden:
            continue
        kind = ", ".join([type_cell(field.annotation), *constraints(field.metadata)])
        if field.default_factory is not None:
            default = show(field.default_factory())
        elif field.default is PydanticUndefined:
            default = "required"
        else:
            default = show(field.default)
        if default != "required" and len(default) > LONG_DEFAULT:
            below.append(f"Default of `{name}`:\n\n```text\n{field.default}\n```")
            default = "(below)"
        elif default != "required":
            default = f"`{default}`"
        rows.append(row(name, kind, default, md(docs.get(name, "")) or "—"))
    return rows, below


HEADER = ["| key | type | default | description |", "| --- | --- | --- | --- |"]


def model_section(section: Section) -> Iterator[str]:
    model = load(section.model)
    yield f"## {section.title}"
    yield ""
    yield f"{section.where} Validated by `{section.model}`: {md(model.__doc__ or '')}"
    yield ""
    rows, below = field_rows(model, section.hidden)
    if section.reader:
        for key, (kind, default, doc) in config_keys(load(section.reader)).items():
            rows.append(row(key, kind, f"`{default}`" if default != "required" else default, md(doc) or "—"))
    if not rows:
        yield "No keys of its own: any other key is an error."
        yield ""
        return
    yield from [*HEADER, *rows, ""]
    for text in below:
        yield text
        yield ""


def algorithm_section() -> Iterator[str]:
    """The ``algorithm.*`` keys the pack adds: defaults and docs from their parsers."""
    from extensions.custom_advantages import STEP_WEIGHT_KEY, step_weight_from
    from extensions.segment_weights import MODES, SETTING, segment_weight_mode

    yield "## Algorithm keys"
    yield ""
    yield (
        "Keys the pack reads from verl's `algorithm:` block. verl's YAML lacks them, so add them with a `+` "
        "(`+algorithm.segment_weight=none`)."
    )
    yield ""
    yield from HEADER
    modes = " or ".join(f"`{m!r}`" for m in MODES)
    yield row(SETTING, modes, f"`{show(segment_weight_mode({}))}`", md(segment_weight_mode.__doc__ or ""))
    yield row(STEP_WEIGHT_KEY, "`float`", f"`{show(step_weight_from({}))}`", md(step_weight_from.__doc__ or ""))
    yield ""


def trainer_section() -> Iterator[str]:
    """The ``trainer.v1.*`` keys the pack reads (its hooks on verl's v1 trainer)."""
    from extensions.verl_compat.padding_rows import DOC as PADDING_DOC
    from extensions.verl_compat.padding_rows import KEY as PADDING_KEY
    from extensions.verl_compat.replay_poll import POLL_DOC, POLL_KEY
    from extensions.verl_compat.whole_batch import DOC as WHOLE_BATCH_DOC
    from extensions.verl_compat.whole_batch import KEY as WHOLE_BATCH_KEY

    yield "## Trainer keys (v1 trainer)"
    yield ""
    yield (
        "Keys the pack reads from verl's `trainer.v1` block. verl's YAML lacks them: set them in your config, or "
        "add them with a `+` on the command line (`+trainer.v1.padding_row_tokens=128`)."
    )
    yield ""
    yield from HEADER
    yield row(f"sampler.sampler_kwargs.{POLL_KEY}", "`float` or `None`", "`null`", POLL_DOC)
    yield row(PADDING_KEY.removeprefix("trainer.v1."), "`int` or `None`", "`null`", PADDING_DOC)
    yield row(WHOLE_BATCH_KEY.removeprefix("trainer.v1."), "`bool`", "`false`", WHOLE_BATCH_DOC)
    yield ""


def config_keys(cls: type) -> dict[str, tuple[str, str, str]]:
    """{key: (type cell, default, docstring)} of ``config.get("key", default)``, ``config.pop(...)`` and ``config["key"]``
    in ``cls.__init__``. The type is an annotated assignment's (``self.x: T = config.get(...)``) or a wrapping
    ``int(...)``/``float(...)``/``str(...)``/``bool(...)``; defaults are evaluated in the module; the docstring is
    a string literal right after the statement."""
    module = sys.modules[cls.__module__]
    body = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__))).body[0].body
    found: dict[str, tuple[str, str, str]] = {}
    for stmt, after in zip(body, [*body[1:], None], strict=True):
        doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
        doc = doc if isinstance(doc, str) else ""
        annotated = ""
        if isinstance(stmt, ast.AnnAssign):
            annotated = type_cell(eval(compile(ast.Expression(stmt.annotation), "<type>", "eval"), vars(module)))
        casts = {
            id(node.args[0]): f"`{node.func.id}`"
            for node in ast.walk(stmt)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args
            if node.func.id in {"int", "float", "str", "bool", "dict", "list"}
        }
        for node in ast.walk(stmt):
            key, default = _read_key(node, module)
            if not isinstance(key, str):
                continue
            kind, known, known_doc = found.get(key, ("", "", ""))
            # an explicit default wins; else a key read as config["key"] is required; else null
            better = known in ("", "null") or (known == "required" and default not in ("null", "required"))
            found[key] = (kind or annotated or casts.get(id(node), ""), default if better else known, known_doc or doc)
    return found


def _read_key(node: ast.AST, module: types.ModuleType) -> tuple[str | None, str]:
    """(key, default) when ``node`` reads a key of ``config``, else (None, "")."""
    if isinstance(node, ast.Subscript) and _is_config(node.value) and isinstance(node.slice, ast.Constant):
        return node.slice.value, "required"
    method = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in {"get", "pop"}
    if not (method and _is_config(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)):
        return None, ""
    if len(node.args) == 1:
        return node.args[0].value, "null"
    return node.args[0].value, show(eval(compile(ast.Expression(node.args[1]), "<default>", "eval"), vars(module)))


def _is_config(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "config"


def interaction_section() -> Iterator[str]:
    yield "## Interactions (`config:`)"
    yield ""
    yield (
        "`config:` of an entry of an interaction file (`interaction_config_path` of an agent-loop entry; verl ≤ "
        "0.7's `interaction:` list). Keys and defaults as each class's constructor reads them; an unknown key is "
        "an error that lists the valid ones. `name` (the entry's name) is set by the loader. Keys with a blank type "
        "are passed on as given (see the class docstring for their shape)."
    )
    yield ""
    for dotted in INTERACTIONS:
        cls = load(dotted)
        module = sys.modules[cls.__module__]
        yield f"### `{dotted}`"
        yield ""
        yield md((module.__doc__ or "").split("\n\n")[0])
        yield ""
        keys = {k: v for k, v in config_keys(cls).items() if k != "name"}
        extra = sorted(set(getattr(module, "CONFIG_KEYS", ())) - set(keys) - {"name"})
        yield "| key | type | default |"
        yield "| --- | --- | --- |"
        for key, (kind, default, _) in keys.items():
            if default != "required" and len(default) > LONG_DEFAULT:
                default = "(see the class)"
            elif default != "required":
                default = f"`{default}`"
            yield f"| `{key}` | {kind} | {default} |"
        for key in extra:
            yield f"| `{key}` |  | (see the class) |"
        yield ""


def registries_section() -> Iterator[str]:
    """The names the plugin registers with verl: agent loops, tool parsers, advantage estimators."""
    import yaml

    from extensions.custom_advantages import ESTIMATORS
    from extensions.plugin import AGENT_LOOPS  # importing it fills the registries, as verl's plugin loading does
    from extensions.verl_compat import agent_loop_registry, tool_parser_registry

    pack_parsers = sorted(
        name
        for name, parser in tool_parser_registry().items()
        if getattr(parser, "__module__", "").startswith("extensions.")
    )
    entries = yaml.safe_load((ROOT / "extensions" / "custom_rollouts.yaml").read_text())
    loops = dict(AGENT_LOOPS)  # what the plugin registers; the live registry also holds whatever a run loaded
    assert set(loops) <= set(agent_loop_registry()), "the plugin did not register its loops"
    listed = ", ".join(f"`{e['name']}`" for e in entries)
    yield "## Names the plugin registers"
    yield ""
    yield "Loaded through verl's `verl.plugins` entry point (`extensions/plugin.py`)."
    yield ""
    yield "| setting | values the pack adds |"
    yield "| --- | --- |"
    loop_names = ", ".join(f"`{n}` ({t.rsplit('.', 1)[-1]})" for n, t in loops.items())
    yield f"| `actor_rollout_ref.rollout.agent.default_agent_loop`, the data's `agent_name` | {loop_names} |"
    yield f"| `actor_rollout_ref.rollout.multi_turn.format`, `tool_parser` | {', '.join(f'`{p}`' for p in pack_parsers)} |"
    yield f"| `algorithm.adv_estimator` | {', '.join(f'`{e}`' for e in ESTIMATORS)} |"
    yield ""
    yield f"`agent_loop_config_path=extensions/custom_rollouts.yaml` adds the entries {listed}."
    yield ""


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m extensions.config_reference` from the code: do not edit by hand. -->",
        "",
        "Every setting the pack reads, with its type, default and docstring, generated from the code "
        "(`python -m extensions.config_reference`; a test fails when this page and the code disagree). "
        "An unknown key or a wrong type is an error naming the key and the valid ones; "
        "`python -m extensions.config_check` lists every such problem of your YAML at once "
        "([Troubleshooting](../troubleshooting.md)).",
        "",
    ]
    for section in SECTIONS:
        lines += list(model_section(section))
    lines += list(algorithm_section())
    lines += list(trainer_section())
    lines += list(interaction_section())
    lines += list(registries_section())
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extensions.config_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when the page is stale")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    text = render()
    if not args.check:
        args.page.parent.mkdir(parents=True, exist_ok=True)
        args.page.write_text(text)
        print(f"wrote {args.page}")
        return 0
    current = args.page.read_text() if args.page.is_file() else ""
    if current == text:
        print(f"{args.page} is up to date")
        return 0
    diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(args.page), "generated")
    sys.stdout.writelines(diff)
    print(f"\n{args.page} is stale: run python -m extensions.config_reference")
    return 1


if __name__ == "__main__":
    sys.exit(main())
