"""limit_starts: when each rate-limited key's runs started (issue 26)

Online: a new table.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import AutoIncrementId, UtcDateTime

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "limit_starts",
        sa.Column("id", AutoIncrementId, autoincrement=True, nullable=False),
        sa.Column("limit_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_limit_starts")),
    )
    op.create_index(
        op.f("ix_limit_starts_limit_id_key_started_at"),
        "limit_starts",
        ["limit_id", "key", "started_at"],
    )
    op.create_index(op.f("ix_limit_starts_started_at"), "limit_starts", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_limit_starts_started_at"), table_name="limit_starts")
    op.drop_index(op.f("ix_limit_starts_limit_id_key_started_at"), table_name="limit_starts")
    op.drop_table("limit_starts")
