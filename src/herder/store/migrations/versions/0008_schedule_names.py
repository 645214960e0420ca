"""schedule names

Not online: a unique index on schedules is built in one statement.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    # An index, not a unique constraint: SQLite's batch mode would recreate the table, and
    # recreating it loses other tables' descending indexes.
    op.add_column("schedules", sa.Column("name", sa.String(length=128), nullable=True))
    op.create_index(
        op.f("ix_schedules_tenant_id_name"), "schedules", ["tenant_id", "name"], unique=True
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_schedules_tenant_id_name"), table_name="schedules")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_column("name")
