"""The API's OpenAPI document, read once at collection time so tests can be generated
from it (a new route is then covered without anyone listing it)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from herder.api.app import create_app
from herder.settings import Settings, sqlite_url
from herder.store.store import Store


def _document() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as home:
        url = sqlite_url(Path(home) / "herder.db")
        store = Store(url)
        try:
            return create_app(store, Settings(home=Path(home), database_url=url)).openapi()
        finally:
            store.close()


OPENAPI = _document()


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path template, operation) of every route."""
    return [
        (method.upper(), path, operation)
        for path, methods in OPENAPI["paths"].items()
        for method, operation in methods.items()
    ]
