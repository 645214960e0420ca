"""runs.suspend_requested and runs.suspensions: a run held until resumed (issue 24)

``suspend_requested`` marks a running run whose workers are stopping it for a suspend (it is
held ``suspended`` when they report); ``suspensions`` counts attempts a suspend stopped, which
use up no try. On PostgreSQL the columns reach the attached slices of ``runs`` through the
partitioned table; a slice detached and not yet exported to the cold tier gets them too,
since the export reads a slice as the table's columns.

Online: columns with constant defaults, which PostgreSQL adds without a rewrite.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("suspend_requested", sa.Boolean(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("suspensions", sa.Integer(), server_default="0", nullable=False)
        )
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        runs = next(table for table in HISTORY_TABLES if table.name == "runs")
        for piece in sorted(detached_slices(connection, runs)):
            name = runs.partition(piece)
            op.execute(
                f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS suspend_requested BOOLEAN '
                "NOT NULL DEFAULT false"
            )
            op.execute(
                f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS suspensions INTEGER '
                "NOT NULL DEFAULT 0"
            )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("suspensions")
        batch_op.drop_column("suspend_requested")
