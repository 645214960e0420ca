"""The layers (docs/design.md §1, §7): a router may import ``herder.app`` and call the Store's
repositories (``store.jobs.get(...)``), but never imports ``herder.store`` modules, never opens
a unit of work (``store.work()``), never touches ``store.database``; a plain read or write is
one repository call, and what takes more is a use case in ``herder.app``. The store is below
the use cases: no module of it imports ``herder.app``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import herder.api.routers
import herder.store

ROUTERS = sorted(Path(herder.api.routers.__file__).parent.glob("*.py"))
STORE = Path(herder.store.__file__).parent
BEYOND_THE_REPOSITORIES = ("work", "database")  # what only the store and the use cases touch


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def imports_of(source: str, package: str) -> list[str]:
    """Each import of ``package`` (or of a module in it) in ``source``, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            if any(_within(name, package) for name in [node.module, *named]):
                found.append(f"line {node.lineno}: imports from {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: imports {alias.name}"
                for alias in node.names
                if _within(alias.name, package)
            ]
    return found


def _is_a_store(node: ast.expr) -> bool:
    """``store`` or ``….store`` (``request.app.state.store``)."""
    return (isinstance(node, ast.Name) and node.id == "store") or (
        isinstance(node, ast.Attribute) and node.attr == "store"
    )


def store_uses(source: str) -> list[str]:
    """Each import of ``herder.store`` in ``source``, and each reach past a store's
    repositories (its unit of work, its database), by line."""
    found = imports_of(source, "herder.store")
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in BEYOND_THE_REPOSITORIES
            and _is_a_store(node.value)
        ):
            found.append(f"line {node.lineno}: touches store.{node.attr}")
    return found


@pytest.mark.parametrize("path", ROUTERS, ids=lambda path: path.name)
def test_a_router_reaches_the_store_only_through_its_repositories_or_a_use_case(
    path: Path,
) -> None:
    assert store_uses(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "from herder.store.audit import AuditFilter",
        "from herder import store",
        "import herder.store.gauges",
        "def add(store):\n    with store.work() as work: work.apply(changes)",
        "def ready(store): return store.database.ping()",
        "def ready(request): return request.app.state.store.database.dialect",
    ],
)
def test_the_check_sees_a_router_that_reaches_past_the_repositories(source: str) -> None:
    assert store_uses(source)


@pytest.mark.parametrize(
    "source",
    [
        "def get(store): return store.jobs.get('t', 'j')",
        "from herder.app import jobs\ndef patch(store): return jobs.update(store, 't', 'j', {})",
    ],
)
def test_the_check_lets_a_router_call_a_repository_or_a_use_case(source: str) -> None:
    assert store_uses(source) == []


def test_no_store_module_imports_the_use_cases() -> None:
    found = [
        f"{path.relative_to(STORE)} {use}"
        for path in sorted(STORE.rglob("*.py"))
        for use in imports_of(path.read_text(), "herder.app")
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    ["from herder.app import jobs", "from herder.app.jobs import update", "import herder.app"],
)
def test_the_check_sees_a_store_module_that_imports_a_use_case(source: str) -> None:
    assert imports_of(source, "herder.app")


def test_the_check_does_not_take_the_api_for_the_use_cases() -> None:
    assert imports_of("from herder.api.errors import problem", "herder.app") == []
