"""checkpoint_contents: each stored checkpoint content, where its bytes are (the database or
the cold store) and since when no checkpoint names it (issue 24)

Contents saved before this revision are all in the database: one row each, from the
checkpoints that name them.

Online: a new table, filled from checkpoints (one row per live run's checkpoint).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import UtcDateTime

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "checkpoint_contents",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("stored_bytes", sa.BigInteger(), nullable=False),
        sa.Column("location", sa.String(length=16), nullable=False),
        sa.Column("unreferenced_since", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "sha256", name=op.f("pk_checkpoint_contents")),
    )
    op.create_index(
        op.f("ix_checkpoint_contents_unreferenced_since"),
        "checkpoint_contents",
        ["unreferenced_since"],
    )
    op.execute(
        "INSERT INTO checkpoint_contents (tenant_id, sha256, stored_bytes, location)"
        " SELECT tenant_id, sha256, MAX(stored_bytes), 'database' FROM checkpoints"
        " GROUP BY tenant_id, sha256"
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_checkpoint_contents_unreferenced_since"), table_name="checkpoint_contents"
    )
    op.drop_table("checkpoint_contents")
