"""attempts.stopped_by: whether a stop by its worker ended the attempt at SIGTERM or SIGKILL

On PostgreSQL the column reaches the attached slices of ``attempts`` through the partitioned
table; a slice detached and not yet exported to the cold tier gets it too, since the export
reads a slice as the table's columns.

Online: a nullable column.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stopped_by", sa.String(length=8), nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        attempts = next(table for table in HISTORY_TABLES if table.name == "attempts")
        for piece in sorted(detached_slices(connection, attempts)):
            name = attempts.partition(piece)
            op.execute(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS stopped_by VARCHAR(8)')


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("stopped_by")
