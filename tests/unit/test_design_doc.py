"""docs/design.md and the folder guides say what the code has: the tables and migrations
counted in design §2 and the store's guide, every module a folder guide names exists, and
every module of the store and the worker is in its guide. A migration, a table or a module
added without them fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from herder.store.schema import metadata

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
PACKAGE = ROOT / "src" / "herder"
GUIDES = sorted(PACKAGE.glob("*/README.md"))
MIGRATIONS = sorted(
    (PACKAGE / "store" / "migrations" / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
)


def last_migration() -> str:
    return MIGRATIONS[-1].name[:4]


def test_design_counts_the_tables_and_migrations() -> None:
    text = DESIGN.read_text()
    assert f"{len(metadata.tables)} tables" in text
    assert f"migrations 0001\N{EN DASH}{last_migration()} run at start" in text


def test_the_store_guide_names_the_last_migration() -> None:
    assert (
        f"revisions 0001\N{EN DASH}{last_migration()}"
        in (PACKAGE / "store" / "README.md").read_text()
    )


def modules_of(folder: Path) -> list[Path]:
    return sorted(
        path
        for path in [*folder.rglob("*.py"), *folder.glob("*.c")]
        if path.name != "__init__.py"
        and "versions" not in path.parts
        and path.parent.name != "schema"
    )


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.parent.name)
def test_a_folder_guide_names_every_module_of_its_folder(guide: Path) -> None:
    text = guide.read_text()
    missing = [
        str(path.relative_to(guide.parent))
        for path in modules_of(guide.parent)
        if f"`{path.name}`" not in text and f"`{path.relative_to(guide.parent)}`" not in text
    ]
    assert missing == []


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.parent.name)
def test_every_module_a_folder_guide_names_exists(guide: Path) -> None:
    named = set(re.findall(r"`([\w/]+\.(?:py|c))`", guide.read_text()))
    names = {path.name for path in modules_of(guide.parent)}
    paths = {str(path.relative_to(guide.parent)) for path in modules_of(guide.parent)}
    outside = {name for name in named if "/" in name and (PACKAGE / name).exists()}
    assert sorted(named - names - paths - outside) == []
