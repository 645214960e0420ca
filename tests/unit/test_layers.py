"""Routers reach the store only through ``herder.services`` (docs/design.md §1: routers → services →
store): a router parses HTTP and calls one use case; it neither imports ``herder.store`` nor
reaches into the store it is handed, which it only passes on."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import herder.api.routers

ROUTERS = sorted(Path(herder.api.routers.__file__).parent.glob("*.py"))


def _is_store_module(name: str) -> bool:
    return name == "herder.store" or name.startswith("herder.store.")


def store_uses(source: str) -> list[str]:
    """Each import of ``herder.store`` and each reach into a store (``store.x``,
    ``….state.store``) in ``source``, by line."""
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
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "store":
                found.append(f"line {node.lineno}: calls store.{node.attr}")
            elif node.attr == "store":
                found.append(f"line {node.lineno}: reaches for a store")
    return found


@pytest.mark.parametrize("path", ROUTERS, ids=lambda path: path.name)
def test_a_router_reaches_the_store_only_through_a_service(path: Path) -> None:
    assert store_uses(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "from herder.store.audit import AuditFilter",
        "from herder import store",
        "import herder.store.gauges",
        "def get(store): return store.jobs.get('t', 'j')",
        "def ready(request): return request.app.state.store",
    ],
)
def test_the_check_sees_a_router_that_reaches_the_store(source: str) -> None:
    assert store_uses(source)


def test_the_check_lets_a_router_hand_the_store_to_a_service() -> None:
    source = "from herder.services import jobs\ndef get(store): return jobs.read(store, 't', 'j')"
    assert store_uses(source) == []
