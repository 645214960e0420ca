"""Routers stay at the edge (docs/design.md §1): a router may import ``herder.app`` and call
the Store's repositories (``store.jobs.get(...)``), but never imports ``herder.store``
modules, never opens a unit of work (``store.work()``) nor touches ``store.database``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import herder.api.routers

ROUTERS = sorted(Path(herder.api.routers.__file__).parent.glob("*.py"))
_BELOW_THE_REPOSITORIES = frozenset({"work", "database"})


def _is_store_module(name: str) -> bool:
    return name == "herder.store" or name.startswith("herder.store.")


def store_uses(source: str) -> list[str]:
    """Each import of ``herder.store`` and each use of a store below its repositories
    (``store.work``, ``store.database``) in ``source``, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            if any(_is_store_module(name) for name in [node.module, *named]):
                found.append(f"line {node.lineno}: imports from {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: imports {alias.name}"
                for alias in node.names
                if _is_store_module(alias.name)
            ]
        elif isinstance(node, ast.Attribute) and node.attr in _BELOW_THE_REPOSITORIES:
            if isinstance(node.value, ast.Name) and node.value.id == "store":
                found.append(f"line {node.lineno}: uses store.{node.attr}")
            elif isinstance(node.value, ast.Attribute) and node.value.attr == "store":
                found.append(f"line {node.lineno}: uses a store's {node.attr}")
    return found


@pytest.mark.parametrize("path", ROUTERS, ids=lambda path: path.name)
def test_a_router_uses_the_store_only_through_its_repositories(path: Path) -> None:
    assert store_uses(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "from herder.store.audit import AuditFilter",
        "from herder import store",
        "import herder.store.gauges",
        "def apply(store): \n    with store.work() as work: work.apply(None)",
        "def count(store): return store.database.read()",
        "def ready(request): return request.app.state.store.database",
    ],
)
def test_the_check_sees_a_router_that_goes_below_the_repositories(source: str) -> None:
    assert store_uses(source)


@pytest.mark.parametrize(
    "source",
    [
        "def get(store): return store.jobs.get('t', 'j')",
        "from herder.app import submit\ndef run(store): return submit.submit(store, 't', 'j')",
    ],
)
def test_the_check_lets_a_router_call_a_repository_or_a_use_case(source: str) -> None:
    assert store_uses(source) == []
