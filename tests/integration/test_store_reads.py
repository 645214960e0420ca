"""A read on PostgreSQL is its statements alone, each its own transaction: no BEGIN and no
COMMIT round trip around them (under read committed they shared no snapshot anyway). A
write is one transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from herder.store.store import Store

STARTED = text("SELECT CAST(transaction_timestamp() AS TEXT)")


def test_a_reads_statements_are_each_their_own_transaction(store: Store) -> None:
    if not store.database.is_postgres:
        pytest.skip("SQLite's read is one transaction: one snapshot of its file")
    with store.database.read() as connection:
        first = connection.execute(STARTED).scalar()
        second = connection.execute(STARTED).scalar()
    assert first != second
    with store.database.write() as connection:
        first = connection.execute(STARTED).scalar()
        second = connection.execute(STARTED).scalar()
    assert first == second
