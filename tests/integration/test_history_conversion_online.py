"""Migration 0015 converts a PostgreSQL history online: a server of revision 0014 goes on
writing while the rows move, and afterwards every row is in the partitioned tables once, in
its newest version, and runs' unique keys are all held by the guards. Interrupted half-way,
the conversion finishes when run again. Its timings are the bench's
(``python -m bench.migration_online``); here the longest statement is only printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from alembic import command
from bench.history_load import KEYS, OldServerLoad, fill, snapshot
from sqlalchemy import text

from herder.store.database import Database
from herder.store.history import conversion, mirror
from herder.store.history.brief_transactions import in_brief_transaction
from herder.store.history.guards import RUN_GUARDS
from herder.store.migrations import alembic_config
from tests.clones import database_at_revision

pytestmark = pytest.mark.postgres
RUNS = 6_000


@pytest.fixture
def at_0014(postgres_template: str) -> Iterator[Database]:
    with database_at_revision("history_online", "0014") as database:
        yield database


def _url(database: Database) -> str:
    return database.url.replace("postgresql+psycopg://", "postgresql://")


def test_the_history_moves_while_a_server_of_the_revision_before_writes(
    at_0014: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(_url(at_0014), RUNS, datetime.now(UTC))
    monkeypatch.setattr(mirror, "COPY_BATCH_ROWS", 600)  # more batches beside the writes
    before = snapshot(_url(at_0014))
    load = OldServerLoad(_url(at_0014), keep_rows=True)
    load.start()
    try:
        command.upgrade(alembic_config(at_0014), "0015")
    finally:
        report = load.stop()
    print(report.line())
    assert report.errors == []
    assert report.statements > 100
    assert snapshot(_url(at_0014)) == _applied(before, load.rows)
    _assert_guards_hold_every_key(at_0014)
    command.upgrade(alembic_config(at_0014), "head")
    with at_0014.read() as connection:
        leftovers = connection.execute(
            text(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                " AND (relname LIKE '%\\_shadow%' OR relname LIKE '%\\_unpartitioned%')"
                " UNION ALL SELECT proname FROM pg_proc WHERE proname LIKE '%\\_to\\_shadow'"
            )
        ).all()
    assert leftovers == []


class _Interrupted(Exception):
    """The process killed half-way, as the migration sees it."""


def test_an_interrupted_conversion_finishes_when_run_again(
    at_0014: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(_url(at_0014), 2_000, datetime.now(UTC))
    monkeypatch.setattr(mirror, "COPY_BATCH_ROWS", 500)
    copied = {"runs": 0}

    def copy_then_die(connection: Any, history: Any, after: Any) -> mirror.Copied:
        if history.name == "runs":
            copied["runs"] += 1
            if copied["runs"] == 3:
                raise _Interrupted
        return mirror.copy_batch(connection, history, after)

    monkeypatch.setattr(conversion, "copy_batch", copy_then_die)
    with pytest.raises(_Interrupted):
        command.upgrade(alembic_config(at_0014), "0015")
    before = snapshot(_url(at_0014))  # attempts moved already; runs half copied, mirrored
    load = OldServerLoad(_url(at_0014), keep_rows=True)
    assert load.write(rounds=20).errors == []
    monkeypatch.setattr(conversion, "copy_batch", mirror.copy_batch)
    command.upgrade(alembic_config(at_0014), "0015")
    assert snapshot(_url(at_0014)) == _applied(before, load.rows)
    _assert_guards_hold_every_key(at_0014)


def test_a_statement_waits_a_second_for_a_lock_and_is_tried_again(at_0014: Database) -> None:
    """A long transaction holding a table: the conversion's statement gives up after a
    second (no one queues behind it longer) and gets the lock on a later try."""
    tries: list[int] = []
    with psycopg.connect(_url(at_0014)) as holder:
        holder.execute("LOCK TABLE runs IN ACCESS SHARE MODE")

        def add_column(connection: Any) -> None:
            tries.append(len(tries) + 1)
            if len(tries) == 2:  # the long transaction ends after the first try gave up
                holder.commit()
            connection.execute(text("ALTER TABLE runs ADD COLUMN probe integer"))

        in_brief_transaction(at_0014.engine, add_column)
    assert tries == [1, 2]


def _applied(
    before: dict[str, dict[Any, dict[str, Any]]],
    written: dict[str, dict[Any, dict[str, Any] | None]],
) -> dict[str, dict[Any, dict[str, Any]]]:
    """The rows there were, with the load's writes over them."""
    tables = {table: dict(rows) for table, rows in before.items()}
    for table in KEYS:
        for key, row in written[table].items():
            if row is None:
                tables[table].pop(key, None)
            else:
                tables[table][key] = row
    return tables


def _assert_guards_hold_every_key(database: Database) -> None:
    """Each key a run holds is in its guard table, and a second run with it is skipped."""
    with database.write() as connection:
        for guard, columns, _ in RUN_GUARDS:
            listed = ", ".join(columns)
            present = " AND ".join(f"runs.{c} IS NOT NULL" for c in columns)
            missing = connection.execute(
                text(
                    f"SELECT count(*) FROM runs WHERE {present} AND ({listed}) NOT IN"
                    f" (SELECT {listed} FROM {guard})"
                )
            ).scalar_one()
            assert missing == 0, guard
            again = connection.execute(
                text(
                    "INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs,"
                    " to_jsonb(runs) || jsonb_build_object('id', 'run_again'))).*"
                    f" FROM runs WHERE {present} LIMIT 1 ON CONFLICT DO NOTHING RETURNING id"
                )
            ).all()
            assert again == [], guard
