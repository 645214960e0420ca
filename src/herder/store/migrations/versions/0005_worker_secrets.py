"""worker secrets

Online: a nullable column.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    # Workers registered before the upgrade have no secret, so they cannot act any more: they
    # register again (under a new id, with a secret) and the reaper declares the old ids lost.
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("secret_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("secret_hash")
