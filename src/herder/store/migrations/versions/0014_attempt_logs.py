"""attempt_logs: an ended attempt's output compacted into one compressed blob

Online: a new table.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import UtcDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None
online = True

ID = sa.String(length=40)


def upgrade() -> None:
    op.create_table(
        "attempt_logs",
        sa.Column("attempt_id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("encoding", sa.String(length=16), nullable=False),
        sa.Column("content_bytes", sa.Integer(), nullable=False),
        sa.Column("stored_bytes", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("compacted_at", UtcDateTime(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempts.id"], name=op.f("fk_attempt_logs_attempt_id_attempts")
        ),
        sa.PrimaryKeyConstraint("attempt_id", name=op.f("pk_attempt_logs")),
    )


def downgrade() -> None:
    op.drop_table("attempt_logs")
