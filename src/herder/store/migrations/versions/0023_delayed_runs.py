"""runs.run_at: a delayed run is ``scheduled`` until then (issue 26)

Not online: an index on runs is built in one statement.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.types import UtcDateTime

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_at", UtcDateTime(), nullable=True))
    op.create_index(op.f("ix_runs_state_run_at"), "runs", ["state", "run_at"])
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        runs = next(table for table in HISTORY_TABLES if table.name == "runs")
        for piece in sorted(detached_slices(connection, runs)):
            name = runs.partition(piece)
            op.execute(
                f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS run_at TIMESTAMP WITH TIME ZONE'
            )


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_state_run_at"), table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("run_at")
