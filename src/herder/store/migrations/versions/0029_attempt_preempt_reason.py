"""attempts.preempt_reason: why the dispatcher stops a running attempt — for a higher-priority
run, to reclaim a tenant's pool share, or by a spent hard budget — so its end says so whatever
its worker saw (issue 41)

On PostgreSQL the column reaches the attached slices of ``attempts`` through the partitioned
table; a slice detached and not yet exported to the cold tier gets it too, since the export
reads a slice as the table's columns.

Online: a nullable column.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("preempt_reason", sa.Text(), nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        attempts = next(table for table in HISTORY_TABLES if table.name == "attempts")
        for piece in sorted(detached_slices(connection, attempts)):
            name = attempts.partition(piece)
            op.execute(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS preempt_reason TEXT')


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("preempt_reason")
