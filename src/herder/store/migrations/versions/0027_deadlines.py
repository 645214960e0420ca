"""runs and workflow_runs: deadline_at, deadline_missed_at and their indexes;
workflow_runs.deadline (issue 27)

Not online: indexes on runs and workflow_runs are built in one statement each.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.types import JsonColumn, UtcDateTime

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None
online = False

_COLUMNS = ("deadline_at", "deadline_missed_at")


def _waiting(table: str) -> sa.ColumnElement[bool]:
    """The index's rows: a deadline not yet judged, on a row not finished."""
    columns = sa.table(
        table, sa.column("deadline_at"), sa.column("deadline_missed_at"), sa.column("finished_at")
    ).c
    return sa.and_(
        columns.deadline_at.is_not(None),
        columns.deadline_missed_at.is_(None),
        columns.finished_at.is_(None),
    )


def upgrade() -> None:
    for table in ("runs", "workflow_runs"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            if table == "workflow_runs":
                batch_op.add_column(sa.Column("deadline", JsonColumn, nullable=True))
            for column in _COLUMNS:
                batch_op.add_column(sa.Column(column, UtcDateTime(), nullable=True))
        waiting = _waiting(table)
        op.create_index(
            op.f(f"ix_{table}_deadline_at"),
            table,
            ["deadline_at"],
            postgresql_where=waiting,
            sqlite_where=waiting,
        )
        missed = sa.column("deadline_missed_at").is_not(None)
        op.create_index(
            op.f(f"ix_{table}_tenant_id_deadline_missed_at"),
            table,
            ["tenant_id", "deadline_missed_at"],
            postgresql_where=missed,
            sqlite_where=missed,
        )
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        runs = next(table for table in HISTORY_TABLES if table.name == "runs")
        for piece in sorted(detached_slices(connection, runs)):
            name = runs.partition(piece)
            for column in _COLUMNS:
                op.execute(
                    f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS {column} '
                    "TIMESTAMP WITH TIME ZONE"
                )


def downgrade() -> None:
    for table in ("runs", "workflow_runs"):
        op.drop_index(op.f(f"ix_{table}_tenant_id_deadline_missed_at"), table_name=table)
        op.drop_index(op.f(f"ix_{table}_deadline_at"), table_name=table)
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _COLUMNS:
                batch_op.drop_column(column)
            if table == "workflow_runs":
                batch_op.drop_column("deadline")
