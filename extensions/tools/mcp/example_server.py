"""An MCP server that runs offline: a units converter and a search over a small local text corpus.

    python -m extensions.tools.mcp.example_server                                     # stdio (as MCP clients start it)
    python -m extensions.tools.mcp.example_server --transport streamable-http --port 8765   # http://127.0.0.1:8765/mcp

Built on the official ``mcp`` SDK's ``MCPServer``; it imports nothing from the pack, so it also runs
from its file path. Tools:

- ``convert_units(value, from_unit, to_unit)``: length, mass, time, speed, volume and temperature;
- ``search_corpus(query, top_k)``: the best-matching lines of ``corpus/*.md`` (or ``--corpus DIR``)
  by word overlap, each with its file name.

``tool_configs/mcp_servers.json`` registers it as the ``units_search`` server.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "at",
        "the",
        "of",
        "in",
        "on",
        "is",
        "to",
        "how",
        "what",
        "which",
        "by",
        "for",
        "from",
        "it",
        "its",
        "than",
        "with",
    ]
)

LINEAR_UNITS: dict[str, tuple[str, float]] = {
    # unit: (dimension, size in the dimension's base unit)
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "yd": ("length", 0.9144),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "t": ("mass", 1000.0),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "m/s": ("speed", 1.0),
    "km/h": ("speed", 1000.0 / 3600.0),
    "mph": ("speed", 1609.344 / 3600.0),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "gal": ("volume", 3.785411784),
}
ALIASES = {
    "meter": "m",
    "metre": "m",
    "kilometer": "km",
    "kilometre": "km",
    "centimeter": "cm",
    "centimetre": "cm",
    "millimeter": "mm",
    "millimetre": "mm",
    "mile": "mi",
    "foot": "ft",
    "feet": "ft",
    "inch": "in",
    "inches": "in",
    "yard": "yd",
    "kilogram": "kg",
    "gram": "g",
    "tonne": "t",
    "ton": "t",
    "pound": "lb",
    "lbs": "lb",
    "ounce": "oz",
    "second": "s",
    "sec": "s",
    "minute": "min",
    "hour": "h",
    "hr": "h",
    "days": "day",
    "liter": "l",
    "litre": "l",
    "milliliter": "ml",
    "millilitre": "ml",
    "gallon": "gal",
    "kph": "km/h",
    "celsius": "c",
    "fahrenheit": "f",
    "kelvin": "k",
}
TEMPERATURES = {"c", "f", "k"}


def unit_key(unit: str) -> str:
    """Normalise a unit name: case, plural 's', aliases (``Feet`` -> ``ft``, ``degC`` -> ``c``)."""
    key = unit.strip().lower().replace("degrees ", "").replace("deg", "").replace("°", "")
    if key in LINEAR_UNITS or key in TEMPERATURES:
        return key
    key = ALIASES.get(key, key)
    if key not in LINEAR_UNITS and key.endswith("s"):
        key = ALIASES.get(key[:-1], key[:-1])
    return key


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit``; ValueError names the known units."""
    source, target = unit_key(from_unit), unit_key(to_unit)
    if source in TEMPERATURES or target in TEMPERATURES:
        if not (source in TEMPERATURES and target in TEMPERATURES):
            raise ValueError(f"cannot convert {from_unit!r} to {to_unit!r}: only temperatures convert to temperatures")
        kelvin = {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15, "k": value}[source]
        return {"c": kelvin - 273.15, "f": (kelvin - 273.15) * 9 / 5 + 32, "k": kelvin}[target]
    unknown = [u for u, k in ((from_unit, source), (to_unit, target)) if k not in LINEAR_UNITS]
    if unknown:
        known = ", ".join(sorted(LINEAR_UNITS) + ["C", "F", "K"])
        raise ValueError(f"unknown unit(s) {', '.join(map(repr, unknown))}; known units: {known}")
    (dim_a, size_a), (dim_b, size_b) = LINEAR_UNITS[source], LINEAR_UNITS[target]
    if dim_a != dim_b:
        raise ValueError(f"cannot convert {dim_a} ({from_unit!r}) to {dim_b} ({to_unit!r})")
    return value * size_a / size_b


def search(corpus: Path, query: str, top_k: int) -> list[tuple[str, str]]:
    """The ``top_k`` corpus lines sharing the most query words: (file name, line), best first."""
    words = {w for w in WORD.findall(query.lower()) if w not in STOPWORDS}
    scored = []
    for path in sorted(corpus.glob("*.md")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            overlap = len(words & set(WORD.findall(line.lower())))
            if overlap:
                scored.append((-overlap, path.name, line.strip()))
    return [(name, line) for _, name, line in sorted(scored)[:top_k]]


def build_server(corpus: Path = CORPUS_DIR) -> MCPServer:
    """The MCP server with both tools; ``corpus`` is a folder of ``*.md`` files."""
    app = MCPServer(
        "units_search", instructions="Convert units and look facts up in a small corpus.", log_level="WARNING"
    )

    @app.tool(
        description="Convert a quantity between units of length, mass, time, speed, volume or temperature. "
        "Units: m km cm mm mi ft in yd, kg g t lb oz, s min h day, m/s km/h mph, l ml gal, C F K."
    )
    def convert_units(
        value: Annotated[float, Field(description="The quantity to convert, e.g. 8849")],
        from_unit: Annotated[str, Field(description="Its unit, e.g. m")],
        to_unit: Annotated[str, Field(description="The unit wanted, e.g. ft")],
    ) -> str:
        try:
            result = convert(value, from_unit, to_unit)
        except ValueError as exc:
            raise ToolError(str(exc)) from None  # ToolError's message reaches the client
        return f"{value:g} {from_unit} = {result:.6g} {to_unit}"

    @app.tool(description="Search a small encyclopedia of facts (mountains, rivers, animals, buildings) by keywords.")
    def search_corpus(
        query: Annotated[str, Field(description="Keywords, e.g. 'Everest height'")],
        top_k: Annotated[int, Field(description="How many lines to return", ge=1, le=20)] = 3,
    ) -> str:
        hits = search(corpus, query, top_k)
        if not hits:
            return f"No results for {query!r}."
        return "\n".join(f"[{name}] {line}" for name, line in hits)

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help="folder of *.md files to search")
    args = parser.parse_args(argv)
    app = build_server(args.corpus)
    if args.transport == "stdio":
        app.run()
    else:
        app.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
