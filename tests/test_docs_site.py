"""The docs site (mkdocs.yml, docs/): every page in the nav exists, and user-facing pages name no internal issues."""

from __future__ import annotations

import re

import yaml

from tests.scripts import ROOT, load_script


def nav_pages() -> list[str]:
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        return [page for item in node for page in walk(item)] if isinstance(node, list) else []

    return walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])


def test_every_nav_page_exists_and_the_reference_pages_are_in_it() -> None:
    pages = nav_pages()
    assert [page for page in pages if not (ROOT / "docs" / page).is_file()] == []
    assert {
        "reference/configuration.md",
        "troubleshooting.md",
        "results/README.md",
        "guides/offline-install.md",
    } <= set(pages)


def test_the_site_pages_name_no_internal_issue_numbers() -> None:
    pages = load_script("readme_commands").site_pages()
    found = [
        f"{page.relative_to(ROOT)}: {match.group(0)}"
        for page in pages
        for match in re.finditer(r"\bissues? #?\d+", page.read_text(), flags=re.IGNORECASE)
    ]
    assert found == []
