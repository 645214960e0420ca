"""tenant_budgets and usage_charges: time budgets and what runs used against them (issue 25)

Online: new tables.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import JsonColumn, UtcDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "tenant_budgets",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("budgets", JsonColumn, nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_tenant_budgets_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_tenant_budgets")),
    )
    op.create_table(
        "usage_charges",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("gpu_seconds", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "day", "pool", "job_id", "shard", name=op.f("pk_usage_charges")
        ),
    )


def downgrade() -> None:
    op.drop_table("usage_charges")
    op.drop_table("tenant_budgets")
