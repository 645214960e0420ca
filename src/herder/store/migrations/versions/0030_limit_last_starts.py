"""limit_last_starts: when each key of a limit last started a run, for the keys to take
turns by the starts they had (issue 41)

Online: a new table.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import UtcDateTime

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "limit_last_starts",
        sa.Column("limit_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("limit_id", "key", name=op.f("pk_limit_last_starts")),
    )
    op.create_index(op.f("ix_limit_last_starts_started_at"), "limit_last_starts", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_limit_last_starts_started_at"), table_name="limit_last_starts")
    op.drop_table("limit_last_starts")
