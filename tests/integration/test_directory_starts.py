"""Edges starting at once on one new directory (docs/cells.md): each opens it and makes its
tables if missing, and none fails for another making them at the same moment. On an empty
PostgreSQL database of the test's own (each try a new one), and on a new SQLite file."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from herder.directory.repository import Directory
from herder.settings import sqlite_url
from tests.clones import admin_connection, database_url_named

EDGES = 4  # opening at once
TRIES = 6  # new directories: a race lost once in a few tries shows
_numbers = itertools.count()


@pytest.fixture
def empty_postgres() -> Iterator[Callable[[], str]]:
    """Empty PostgreSQL databases made on demand, dropped after the test."""
    try:
        admin = admin_connection()
    except Exception as error:  # psycopg.OperationalError: as tests/conftest.py decides
        if os.environ.get("HERDER_REQUIRE_POSTGRES") or os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required but unreachable: {error}")
        pytest.skip("PostgreSQL unreachable")
    made: list[str] = []

    def make() -> str:
        name = f"herder_directory_{os.getpid()}_{next(_numbers)}"
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return database_url_named(name)

    with admin:
        try:
            yield make
        finally:
            for name in made:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def open_at_once(url: str) -> list[BaseException]:
    """``EDGES`` directories opened on ``url`` at the same moment; what each raised."""
    start = threading.Barrier(EDGES)
    failures: list[BaseException] = []
    opened: list[Directory] = []
    lock = threading.Lock()

    def open_one() -> None:
        start.wait()
        try:
            directory = Directory(url)
        except BaseException as error:
            with lock:
                failures.append(error)
            return
        with lock:
            opened.append(directory)

    threads = [threading.Thread(target=open_one) for _ in range(EDGES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for directory in opened:
        directory.close()
    return failures


def _works(url: str) -> None:
    directory = Directory(url)
    try:
        directory.create_cell("a", "eu", "http://cell-a.internal:8080", datetime.now(UTC))
        assert [cell.name for cell in directory.cells()] == ["a"]
    finally:
        directory.close()


@pytest.mark.postgres
def test_edges_starting_at_once_on_postgresql_all_open_the_new_directory(
    empty_postgres: Callable[[], str],
) -> None:
    for _ in range(TRIES):
        url = empty_postgres()
        assert open_at_once(url) == []
        _works(url)


def test_edges_starting_at_once_on_sqlite_all_open_the_new_directory(tmp_path: Path) -> None:
    for attempt in range(TRIES):
        url = sqlite_url(tmp_path / f"directory-{attempt}.db")
        assert open_at_once(url) == []
        _works(url)
