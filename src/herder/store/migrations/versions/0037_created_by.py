"""created_by on jobs, schedules, workflows, workflow_runs and runs: who made each
(``domain.actors``: ``user:key_…``, ``schedule:sch_…``), for listings filtered by creator
(issue 46); audit_log.actor: the caller's actor, so that the log names a signed-in person.

Rows made before stay NULL (unknown). No index: a listing filtered by creator reads the
tenant's rows newest first through the indexes it used before and drops the others, and a
run's insert and each of its moves write no index more (docs/design.md §9, §11).

On PostgreSQL the column reaches the attached slices of ``runs`` through the partitioned
table; a slice detached and not yet exported to the cold tier gets it too, since the export
reads a slice as the table's columns.

Online: nullable columns, a change of the catalogue alone. On PostgreSQL each table's in a
brief transaction of its own (``in_brief_transaction``: a lock not had within a second is
given up and tried again), so no ``ALTER TABLE`` queues the servers' statements behind a long
transaction, nor holds one table's lock while it waits for the next's.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-07
"""

from __future__ import annotations

from functools import partial

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

from herder.store.history.brief_transactions import in_brief_transaction
from herder.store.history.partitions import HISTORY_TABLES, detached_slices

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None
online = True

CREATED = ("jobs", "schedules", "workflows", "workflow_runs", "runs")


def upgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name != "postgresql":
        for table in CREATED:
            op.add_column(table, sa.Column("created_by", sa.String(length=128), nullable=True))
        op.add_column("audit_log", sa.Column("actor", sa.String(length=128), nullable=True))
        return
    runs = next(table for table in HISTORY_TABLES if table.name == "runs")
    columns = [(table, "created_by") for table in CREATED]
    columns += [
        (runs.partition(piece), "created_by") for piece in sorted(detached_slices(connection, runs))
    ]
    with op.get_context().autocommit_block():
        for table, column in [*columns, ("audit_log", "actor")]:
            in_brief_transaction(
                connection.engine, partial(_add_column, table=table, column=column)
            )


def _add_column(connection: Connection, table: str, column: str) -> None:
    connection.exec_driver_sql(
        f'ALTER TABLE "{table}" ADD COLUMN IF NOT EXISTS {column} VARCHAR(128)'
    )


def downgrade() -> None:
    # A plain DROP COLUMN on SQLite too (3.35+; no index or constraint names these): a
    # batch's copy of ``jobs`` renamed into place breaks on 0035's trigger naming it.
    op.drop_column("audit_log", "actor")
    for table in reversed(CREATED):
        op.drop_column(table, "created_by")
