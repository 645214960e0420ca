"""history in time slices: tenants' retention; on PostgreSQL runs, attempts, run events and
log chunks partitioned by week, runs' unique keys in guard tables

Not online: the history tables are rewritten in one transaction.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from herder.store.history.conversion import partition_history

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("retention_days", sa.Integer(), server_default="1825", nullable=False)
        )
    if op.get_bind().dialect.name == "postgresql":
        partition_history(op.get_bind(), datetime.now(UTC))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        raise NotImplementedError("partitioned history is not turned back; restore a backup")
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("retention_days")
