"""history in time slices: tenants' retention; on PostgreSQL runs, attempts, run events and
log chunks partitioned by week, runs' unique keys in guard tables

Online: servers of the revision before go on writing while the history moves, on
PostgreSQL (``store/history/conversion.py``), in transactions of its own that never wait more
than a second for a lock; interrupted, it goes on from where it was when run again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from herder.store.history.brief_transactions import in_brief_transaction
from herder.store.history.conversion import partition_history

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("tenants", schema=None) as batch_op:
            batch_op.add_column(
                sa.Column("retention_days", sa.Integer(), server_default="1825", nullable=False)
            )
        return
    with op.get_context().autocommit_block():
        engine = op.get_bind().engine
        in_brief_transaction(
            engine,
            lambda connection: connection.exec_driver_sql(
                "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS"
                " retention_days INTEGER DEFAULT 1825 NOT NULL"
            ),
        )
        partition_history(engine, datetime.now(UTC))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        raise NotImplementedError("partitioned history is not turned back; restore a backup")
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("retention_days")
