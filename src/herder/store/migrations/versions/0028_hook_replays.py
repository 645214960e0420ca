"""hook_deliveries: signed_digest, unique per hook, so a delivery's signed time and body
are accepted once whatever its unsigned headers say; an index to prune refused deliveries
sooner than accepted ones (issue 40)

Not online: a unique index on hook_deliveries is built in one statement.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("hook_deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("signed_digest", sa.String(length=64), nullable=True))
    op.create_index(
        op.f("ix_hook_deliveries_hook_id_signed_digest"),
        "hook_deliveries",
        ["hook_id", "signed_digest"],
        unique=True,
    )
    op.create_index(
        op.f("ix_hook_deliveries_status_received_at"), "hook_deliveries", ["status", "received_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_hook_deliveries_status_received_at"), table_name="hook_deliveries")
    op.drop_index(op.f("ix_hook_deliveries_hook_id_signed_digest"), table_name="hook_deliveries")
    with op.batch_alter_table("hook_deliveries", schema=None) as batch_op:
        batch_op.drop_column("signed_digest")
