"""Write requirements/ci-constraints.txt: the exact version, in this environment, of every package that the pack and the
extras scripts/setup.sh installs need (the closure of pyproject.toml's requirements through the installed metadata).

    .venv/bin/python requirements/freeze_constraints.py    # in an environment where the test suite passed

``bash scripts/setup.sh`` installs with these constraints, so CI runs on exactly the versions that were tested;
pyproject.toml's ranges are what a lab's own environment is held to. Stops, naming the package, if a requirement is
not installed or its installed version is outside the range asked for. Local version labels are dropped
(``torch==2.13.0``, not ``2.13.0+cpu``): setup.sh picks the CPU build itself.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from setuptools._vendor import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "requirements" / "ci-constraints.txt"
HEADER = """\
# Exact versions CI installs: `pip install -e ".[EXTRAS]" -c requirements/ci-constraints.txt` (scripts/setup.sh).
# The environment the test suite passed in, written by `.venv/bin/python requirements/freeze_constraints.py`;
# regenerate it after changing pyproject.toml's dependencies. A lab's own environment is held only to pyproject's ranges.
"""


def setup_extras() -> list[str]:
    """The extras scripts/setup.sh installs with these constraints (``-e ".[test,embedded]" -c ...``)."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    match = re.search(r'-e "\.\[([\w,-]+)\]" -c requirements/ci-constraints\.txt', setup)
    if match is None:
        raise SystemExit('scripts/setup.sh no longer installs -e ".[...]" -c requirements/ci-constraints.txt')
    return match.group(1).split(",")


def roots() -> list[Requirement]:
    """pyproject.toml's runtime requirements and those of setup.sh's extras, the pack's own extras expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    own = canonicalize_name(project["name"])
    reqs = [Requirement(r) for r in project["dependencies"]]
    extras, seen = setup_extras(), set()
    while extras:
        extra = extras.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for r in map(Requirement, project["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == own:
                extras += sorted(r.extras)
            else:
                reqs.append(r)
    return reqs


def applies(req: Requirement, extras: set[str]) -> bool:
    """``req``'s marker holds in this interpreter for the base install or one of ``extras``."""
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras})


def closure(reqs: list[Requirement]) -> dict[str, str]:
    """Canonical name -> installed version of every package ``reqs`` need here, transitively."""
    pinned: dict[str, str] = {}
    expanded: dict[str, set[str]] = {}  # name -> extras whose requirements were followed
    queue = [(r, set()) for r in reqs]
    while queue:
        req, parent_extras = queue.pop()
        if not applies(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{req.name} is required ({req}) but not installed: run bash scripts/setup.sh") from None
        version = Version(dist.version)
        if not req.specifier.contains(version, prereleases=True):
            raise SystemExit(f"{req.name} {version} is installed, outside {req}: reinstall before freezing")
        pinned[name] = version.public
        new = set(req.extras) - expanded.get(name, set())
        if name in expanded and not new:
            continue
        expanded.setdefault(name, set()).update(req.extras)
        wanted = expanded[name]
        queue += [(Requirement(r), wanted) for r in dist.requires or []]
    return pinned


def main() -> int:
    pinned = closure(roots())
    header = HEADER.replace("EXTRAS", ",".join(setup_extras()))
    OUT.write_text(header + "".join(f"{name}=={version}\n" for name, version in sorted(pinned.items())))
    print(f"wrote {OUT.relative_to(ROOT)}: {len(pinned)} packages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
