"""limits and run_limit_keys; runs.limit_keys: flow control by key (issue 26)

Online: new tables and a nullable column.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.types import JsonColumn, UtcDateTime

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "limits",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("spec", JsonColumn, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_limits_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_limits")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_limits_tenant_id_name")),
    )
    op.create_table(
        "run_limit_keys",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("limit_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "limit_id", name=op.f("pk_run_limit_keys")),
    )
    op.create_index(
        op.f("ix_run_limit_keys_limit_id_key_run_id"),
        "run_limit_keys",
        ["limit_id", "key", "run_id"],
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("limit_keys", JsonColumn, nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        runs = next(table for table in HISTORY_TABLES if table.name == "runs")
        for piece in sorted(detached_slices(connection, runs)):
            name = runs.partition(piece)
            op.execute(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS limit_keys JSONB')


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("limit_keys")
    op.drop_index(op.f("ix_run_limit_keys_limit_id_key_run_id"), table_name="run_limit_keys")
    op.drop_table("run_limit_keys")
    op.drop_table("limits")
