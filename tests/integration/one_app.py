"""One app over a fresh SQLite store, for a module whose tests share it (where the store's
kind plays no part, or one store is the point)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.settings import Settings
from herder.store.store import Store
from tests.conftest import fresh_sqlite_url
from tests.integration.conftest import Api


@contextmanager
def sqlite_app(template: Path, directory: Path) -> Iterator[Api]:
    store = Store(fresh_sqlite_url(template, directory))
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    settings = Settings(home=directory, database_url=store.database.url)
    try:
        with TestClient(create_app(store, settings)) as http:
            yield Api(http, store, bootstrap.admin_key, bootstrap.worker_token, bootstrap.tenant.id)
    finally:
        store.close()
