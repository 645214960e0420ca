"""Shared fixtures: a fresh database per test on SQLite and on PostgreSQL.

PostgreSQL databases are cloned from a migrated template (fast), and dropped after the test.
When PostgreSQL cannot be reached the PostgreSQL variants are skipped on a developer's
machine, and fail under CI (``HERDER_REQUIRE_POSTGRES=1``): they must never pass by skipping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from herder.store.database import Database, sqlite_url
from herder.store.store import Store

POSTGRES_URL = os.environ.get("HERDER_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")


def _admin_connection() -> psycopg.Connection[tuple[object, ...]]:
    url = make_url(POSTGRES_URL)
    return psycopg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        dbname=url.database,
        autocommit=True,
        connect_timeout=5,
    )


def _database_url(name: str) -> str:
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated database to clone; its name is unique to this test session."""
    try:
        admin = _admin_connection()
    except psycopg.OperationalError as error:
        if os.environ.get("HERDER_REQUIRE_POSTGRES") or os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required but unreachable at {POSTGRES_URL}: {error}")
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES_URL}")
    name = f"herder_template_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        database = Database(_database_url(name))
        database.migrate()
        database.dispose()
        yield name
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_postgres_url(template: str) -> Iterator[str]:
    name = f"herder_test_{uuid.uuid4().hex[:12]}"
    with _admin_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield _database_url(name)
    with _admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "herder.db")
    else:
        yield from fresh_postgres_url(request.getfixturevalue("postgres_template"))


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    store = Store(database_url)
    store.migrate()
    yield store
    store.close()
