"""The use cases sit above the store (docs/design.md §1, ``herder/app``): no store module
imports ``herder.app``, so the store never calls back into a use case. Read from the source
with ``ast``: typing-only imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import herder.store

STORE = Path(herder.store.__file__).parent
STORE_MODULES = sorted(STORE.rglob("*.py"))


def app_imports(source: str) -> list[str]:
    """Each import of ``herder.app`` in ``source``, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name == "herder.app" or name.startswith("herder.app.") for name in names):
            found.append(f"line {node.lineno}")
    return found


@pytest.mark.parametrize("path", STORE_MODULES, ids=lambda path: str(path.relative_to(STORE)))
def test_no_store_module_imports_a_use_case(path: Path) -> None:
    assert app_imports(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    ["from herder.app.submit import submit_within", "from herder import app", "import herder.app"],
)
def test_the_check_sees_an_import_of_the_use_cases(source: str) -> None:
    assert app_imports(source)
