"""Migration 0037 (``created_by``) on PostgreSQL: the column reaches every slice of runs,
those attached through the partitioned table and one detached but not yet exported (the
cold tier's export reads a slice as the table's columns); a job made before it has no
creator (unknown), and a downgrade takes the columns away again — on SQLite too, where
0035's trigger names ``jobs``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import inspect, text

from herder.domain.jobs import JobSpec
from herder.store.database import Database
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, detach_slice
from herder.store.migrations import alembic_config
from herder.store.store import Store
from tests.clones import database_at_revision
from tests.integration.test_attempt_column_migrations import _has

RUNS = next(table for table in HISTORY_TABLES if table.name == "runs")
CREATED = ("jobs", "schedules", "workflows", "workflow_runs", "runs")


@pytest.mark.postgres
def test_every_slice_of_runs_gets_the_column_and_older_rows_have_no_creator(
    postgres_template: str,
) -> None:
    with database_at_revision("created_by_migration", "0036") as database:
        with database.write() as connection:
            detached, *attached = sorted(attached_slices(connection, RUNS))
            detach_slice(connection, RUNS, detached)
            connection.execute(
                text(
                    "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
                    " VALUES ('ten_old', 'old', 1, false, '{}', now())"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO jobs (id, tenant_id, name, spec, created_at, updated_at, version)"
                    " VALUES ('job_old', 'ten_old', 'old', :spec, now(), now(), 1)"
                ),
                {"spec": JobSpec(runtime="shell", command="true").model_dump_json()},
            )
        assert not _has(database, "runs", "created_by")
        command.upgrade(alembic_config(database), "0037")
        assert all(_has(database, table, "created_by") for table in CREATED)
        assert _has(database, "audit_log", "actor")
        assert _has(database, RUNS.partition(detached), "created_by")
        assert all(_has(database, RUNS.partition(piece), "created_by") for piece in attached)
        store = Store(database.url)
        try:
            old = store.jobs.get("ten_old", "job_old")
            assert (old.created_by, old.created_by_name) == (None, None)
        finally:
            store.close()
        command.downgrade(alembic_config(database), "0036")
        assert not any(_has(database, table, "created_by") for table in CREATED)
        assert not _has(database, "audit_log", "actor")


def test_a_downgrade_on_sqlite_takes_the_columns_away_and_an_upgrade_brings_them_back(
    tmp_path: Path,
) -> None:
    database = Database(f"sqlite:///{tmp_path / 'herder.db'}")

    def kept() -> set[str]:
        with database.read() as connection:
            found = inspect(connection)
            return {
                table
                for table in (*CREATED, "audit_log")
                if {"created_by", "actor"} & {one["name"] for one in found.get_columns(table)}
            }

    try:
        command.upgrade(alembic_config(database), "0037")
        command.downgrade(alembic_config(database), "0036")
        assert kept() == set()
        command.upgrade(alembic_config(database), "0037")
        assert kept() == {*CREATED, "audit_log"}
    finally:
        database.dispose()


@pytest.mark.postgres
def test_a_long_transaction_on_one_table_holds_up_no_other(postgres_template: str) -> None:
    """Online: while the release before reads ``audit_log`` in a long transaction, the
    migration's ``ALTER TABLE`` of it waits (given up and tried again), and meanwhile the
    servers' statements on ``runs`` and ``jobs``, already changed, go on."""
    with database_at_revision("created_by_locks", "0036") as database:
        with database.engine.connect() as reader:
            reader.execute(text("SELECT count(*) FROM audit_log"))  # holds it until rollback
            upgrade = threading.Thread(
                target=command.upgrade, args=(alembic_config(database), "0037")
            )
            upgrade.start()
            try:
                reached = time.monotonic() + 10
                while not _has(database, "runs", "created_by") and time.monotonic() < reached:
                    time.sleep(0.05)  # the migration reaches it, committed
                for table in ("runs", "jobs"):
                    assert _has(database, table, "created_by")
                    with database.engine.connect() as server:
                        server.execute(text("SET lock_timeout = '3s'"))
                        server.execute(text(f"SELECT count(*) FROM {table}"))  # not queued
            finally:
                reader.rollback()
                upgrade.join()
        assert _has(database, "audit_log", "actor")
