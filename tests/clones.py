"""PostgreSQL databases for tests, cloned from a migrated template off the tests' path.

Creating a database from a template takes PostgreSQL about 0.1 seconds; dropping one waits
for a checkpoint (PostgreSQL 15 asks for one in every ``DROP DATABASE``), which takes a second
or more while other tests write. Three background threads keep a few clones ready before tests
ask for them, so a test waits for neither — and each test still gets a database of its own.
Used clones are dropped in batches, each drop on its own connection at the same moment: drops
waiting together are served by one checkpoint, where one at a time each paid for its own (and
held the clone threads from cloning).

On a server that never syncs (``make test``'s own, ``scripts/test-postgres.sh``) a clone copies
the template's files (``STRATEGY FILE_COPY``): its checkpoints write to no disk, and it costs
the server a third less CPU than logging every page of the copy (PostgreSQL 15's default,
``WAL_LOG``, kept on a server that syncs, where each checkpoint would wait on the disk).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg
from alembic import command
from sqlalchemy.engine import make_url

from herder.store.database import Database
from herder.store.migrations import alembic_config

POSTGRES_URL = os.environ.get("HERDER_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
CLONES_AHEAD = 4  # ready before a test asks: enough to hide a clone's latency behind a test
CLONE_THREADS = 3
DROP_BATCH = 8  # used clones dropped together, sharing their checkpoints


def admin_connection() -> psycopg.Connection[tuple[object, ...]]:
    url = make_url(POSTGRES_URL)
    return psycopg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        dbname=url.database,
        autocommit=True,
        connect_timeout=5,
    )


def database_url_named(name: str) -> str:
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def database_at_revision(purpose: str, revision: str) -> Iterator[Database]:
    """A database of its own migrated only to ``revision``, for a migration's test; dropped
    after it."""
    name = f"herder_{purpose}_{os.getpid()}"
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    database = Database(database_url_named(name))
    try:
        command.upgrade(alembic_config(database), revision)
        yield database
    finally:
        database.dispose()
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PostgresClones:
    """Clones of one template: ``take`` one (made ahead), ``drop`` it when done, ``close``
    at the end of the session (drops the unused ones and reports any failed drop)."""

    def __init__(self, template: str) -> None:
        self._template = template
        with admin_connection() as admin:
            syncs = admin.execute("SHOW fsync").fetchone() != ("off",)
        self._strategy = "WAL_LOG" if syncs else "FILE_COPY"
        self._threads = ThreadPoolExecutor(CLONE_THREADS, thread_name_prefix="postgres-clones")
        self._droppers = ThreadPoolExecutor(DROP_BATCH, thread_name_prefix="postgres-drops")
        self._admins: list[psycopg.Connection[tuple[object, ...]]] = []
        self._local = threading.local()  # each thread's own admin connection
        self._ahead: deque[Future[str]] = deque()
        self._used: list[str] = []
        self._drops: list[Future[None]] = []
        self._make_ahead()

    def take(self) -> str:
        future = self._ahead.popleft() if self._ahead else self._threads.submit(self._create)
        self._make_ahead()
        return future.result()

    def drop(self, name: str) -> None:
        self._used.append(name)
        if len(self._used) >= DROP_BATCH:
            self._drop_used()

    def close(self) -> None:
        for future in self._ahead:
            if future.exception() is None:
                self._used.append(future.result())
        self._threads.shutdown(wait=True)
        self._drop_used()
        self._droppers.shutdown(wait=True)
        for admin in self._admins:
            admin.close()
        for drop in self._drops:
            drop.result()

    def _drop_used(self) -> None:
        self._drops.extend(self._droppers.submit(self._drop, name) for name in self._used)
        self._used.clear()

    def _make_ahead(self) -> None:
        while len(self._ahead) < CLONES_AHEAD:
            self._ahead.append(self._threads.submit(self._create))

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        admin: psycopg.Connection[tuple[object, ...]] | None = getattr(self._local, "admin", None)
        if admin is None:
            admin = self._local.admin = admin_connection()
            self._admins.append(admin)
        return admin

    def _create(self) -> str:
        name = f"herder_test_{uuid.uuid4().hex[:12]}"
        self._connection().execute(
            f'CREATE DATABASE "{name}" TEMPLATE "{self._template}" STRATEGY {self._strategy}'
        )
        return name

    def _drop(self, name: str) -> None:
        self._connection().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
