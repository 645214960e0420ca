"""Shared fixtures: a fresh, migrated database per test on SQLite and on PostgreSQL.

Both stores are migrated once per session into a template, and each test gets its own copy:
a file copy on SQLite, a ``CREATE DATABASE … TEMPLATE`` on PostgreSQL (``clones.py`` makes
those ahead of need and drops them after, off the test's path). When PostgreSQL cannot be
reached the PostgreSQL variants are skipped on a developer's machine, and fail under CI
(``HERDER_REQUIRE_POSTGRES=1``): they must never pass by skipping.

``make test`` runs the tests in several processes (pytest-xdist, a module to a process): each
has its own templates, named by its worker and pid. Modules that run attempts as a fixed uid
each have their own (``SANDBOX_UID``); the tests on the outside host run apart, one at a time
(``pytest_itemcollected``).
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy
import typer.main
import typer.testing
from sqlalchemy import event
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.util import LRUCache

import herder.store.database
from herder.keyring import Keyring
from herder.settings import sqlite_url
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.database import Database
from herder.store.store import Store
from herder.worker.workspace import HOST_MEMORY
from tests.clones import POSTGRES_URL, PostgresClones, admin_connection, database_url_named

_CLONES: dict[str, PostgresClones] = {}  # by template name
TEST_KEYRING = Keyring.of([os.urandom(32)])
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")  # gw0, gw1… under -n
MEMORY_WORKSPACES = pytest.StashKey[set[Path]]()  # those there before the session

# typer's CliRunner builds the whole click command tree again on every invoke (12% of the
# integration tests' CPU); the tree of one Typer app is the same every time.
typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]

# Every test's store makes an engine, and each engine compiled every statement again into a
# cache of its own: SQLAlchemy keys compiled SQL by the dialect object, one an engine (a fifth
# of the integration tests' CPU). The tests' engines share one dialect per backend and server,
# once an engine has connected with it (its first connection initializes it), and its cache.
COMPILED_STATEMENTS = 5_000  # the suite's distinct statements, with room (SQLAlchemy: 500)
_SHARED_DIALECTS: dict[tuple[type[Dialect], str | None, int | None], tuple[Dialect, Any]] = {}


def _engine_sharing_compiled_sql(url: str, **options: Any) -> Engine:
    engine = sqlalchemy.create_engine(url, **options)
    key = (type(engine.dialect), engine.url.host, engine.url.port)
    shared = _SHARED_DIALECTS.get(key)
    if shared is not None:
        engine.dialect, engine._compiled_cache = shared
        return engine
    engine._compiled_cache = LRUCache(COMPILED_STATEMENTS)

    def share(_connection: Connection) -> None:
        _SHARED_DIALECTS.setdefault(key, (engine.dialect, engine._compiled_cache))

    event.listen(engine, "engine_connect", share, once=True)
    return engine


herder.store.database.create_engine = _engine_sharing_compiled_sql  # type: ignore[assignment,attr-defined]


# The modules that ran longest (seconds, in the CI run of 2026-12-06 on a loaded box), handed
# out first. ``make test`` spreads whole modules over xdist's processes (--dist loadfile), and
# xdist hands them out most tests first: a long module of few tests came late and ran on alone
# (replayed from that run's times: the system tests' 1,229 s would be 1,142 s in this order, the
# unit and integration tests' 693 s 668 s). Taken again from a CI run later that day.
LONGEST_MODULES = {  # seconds, summed over their tests, in a CI run beside the rest (12-07)
    "tests/system/dashboard/test_dashboard.py": 304,
    "tests/system/test_server_restarts.py": 172,
    "tests/system/test_embedded.py": 146,
    "tests/system/test_scale_out.py": 130,  # 236 s at 50 fires a second, now 25
    "tests/system/test_stopped_cpu.py": 125,
    "tests/system/test_rolling_restart.py": 120,  # 49 s alone
    "tests/system/test_checkpoint_attacks.py": 118,
    "tests/system/test_image_runtime.py": 113,
    "tests/system/test_archive_attacks.py": 108,
    "tests/system/test_failover.py": 97,
    "tests/system/test_autoscaling.py": 70,
    "tests/integration/test_contract.py": 61,
    "tests/integration/test_metrics_counted.py": 45,
    "tests/system/test_schedules.py": 41,
    "tests/system/test_workflows.py": 40,
    "tests/integration/test_checkpoints.py": 40,
    "tests/system/test_checkpoints.py": 38,
    "tests/integration/test_alert_deliveries.py": 37,
    "tests/system/dashboard/test_dashboard_actions.py": 37,
    "tests/integration/test_scheduler_pool.py": 30,
    "tests/system/dashboard/test_dashboard_names.py": 30,
    "tests/integration/test_job_parameters.py": 28,
    "tests/integration/test_access_matrix.py": 28,
    "tests/unit/test_placement_properties.py": 22,
}


@pytest.hookimpl(trylast=True)  # after deselection and pytest's own reordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (``LONGEST_MODULES``), then the others, most tests first:
    the order xdist hands modules out in under ``--no-loadscope-reorder``
    (``scripts/run-tests.sh``). A module's tests keep their order."""
    tests = Counter(_module_of(item) for item in items)
    items.sort(
        key=lambda item: (-LONGEST_MODULES.get(_module_of(item), 0), -tests[_module_of(item)])
    )


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (every module, test and fixture) lives as long as the session:
    frozen, the cyclic collector stops walking it again and again, and it runs less often
    (7-11% of the integration tests' CPU)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[MEMORY_WORKSPACES] = set(_memory_workspace_roots())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Workers at isolation none keep attempt workspaces on /dev/shm and remove their
    directory when they close; those of workers a test killed stay: removed here, by the
    process that ran the session (an xdist worker's could still be in use by another's)."""
    if hasattr(session.config, "workerinput"):
        return
    before = session.config.stash[MEMORY_WORKSPACES]
    for root in set(_memory_workspace_roots()).difference(before):
        shutil.rmtree(root, ignore_errors=True)


def _memory_workspace_roots() -> Iterator[Path]:
    return HOST_MEMORY.glob(f"herder-{os.geteuid()}-*")


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test on the outside host (``tests/system/outside.py``) is marked ``outside_host``:
    that host's addresses and routes are the machine's, so ``make test`` runs these tests
    one at a time, in a process of their own."""
    if "outside" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.outside_host)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated database to clone; its name is unique to this test session."""
    try:
        admin = admin_connection()
    except psycopg.OperationalError as error:
        if os.environ.get("HERDER_REQUIRE_POSTGRES") or os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required but unreachable at {POSTGRES_URL}: {error}")
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES_URL}")
    name = f"herder_template_{XDIST_WORKER}_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        database = Database(database_url_named(name))
        database.migrate()
        database.dispose()
        _CLONES[name] = PostgresClones(name)
        try:
            yield name
        finally:
            _CLONES.pop(name).close()
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_postgres_url(template: str) -> Generator[str, None, None]:
    """A database of its own for one test, dropped after it."""
    clones = _CLONES[template]
    name = clones.take()
    try:
        yield database_url_named(name)
    finally:
        clones.drop(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session, for tests to copy."""
    path = tmp_path_factory.mktemp("sqlite-template") / "herder.db"
    database = Database(sqlite_url(path))
    database.migrate()
    database.dispose()  # the last connection's close folds the WAL into the file
    assert not path.with_name(f"{path.name}-wal").exists()
    return path


def fresh_sqlite_url(template: Path, directory: Path) -> str:
    """A copy of the migrated template in ``directory``: what migrating would have made."""
    path = directory / "herder.db"
    shutil.copyfile(template, path)
    return sqlite_url(path)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database of the test's own, on each store."""
    if request.param == "sqlite":
        yield fresh_sqlite_url(request.getfixturevalue("sqlite_template"), tmp_path)
    else:
        yield from fresh_postgres_url(request.getfixturevalue("postgres_template"))


@pytest.fixture
def artifact_blobs(tmp_path: Path) -> DirectoryBlobStore:
    """The blob store artifacts go to (``herder up``'s is a directory in its home)."""
    return DirectoryBlobStore(tmp_path / "blobs")


@pytest.fixture
def store(database_url: str, artifact_blobs: DirectoryBlobStore) -> Iterator[Store]:
    """The store as a server opens it: with a secrets key (``herder up`` makes one) and a
    blob store for artifacts."""
    yield from opened_store(database_url, artifact_blobs)


def opened_store(
    database_url: str, artifact_blobs: DirectoryBlobStore, *image_registries: str
) -> Iterator[Store]:
    """The ``store`` fixture's, of a server whose operator allows these image registries."""
    store = Store(
        database_url,
        keyring=TEST_KEYRING,
        artifact_blobs=artifact_blobs,
        image_registries=image_registries,
    )
    yield store
    store.close()
