"""submit_buckets: each rate-limited tenant's token bucket, shared by every API process

Online: a new table.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "submit_buckets",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("granted", sa.Float(), nullable=False),
        sa.Column("refilled_at_us", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_submit_buckets_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_submit_buckets")),
    )


def downgrade() -> None:
    op.drop_table("submit_buckets")
