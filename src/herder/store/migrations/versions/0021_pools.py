"""pools and pool_shares; tenants.default_pool, runs.pool, attempts.borrowed (issue 25)

On PostgreSQL the history columns reach the attached slices of ``runs`` and ``attempts``
through the partitioned tables; a slice detached and not yet exported to the cold tier gets
them too, since the export reads a slice as the table's columns.

Online: new tables, and columns nullable or with constant defaults.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.types import JsonColumn, UtcDateTime

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None
online = True

_HISTORY_COLUMNS = {
    "runs": "pool VARCHAR(64)",
    "attempts": "borrowed BOOLEAN NOT NULL DEFAULT false",
}


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("selector", JsonColumn, nullable=False),
        sa.Column("autoscaling", JsonColumn, nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("name", name=op.f("uq_pools_name")),
    )
    op.create_table(
        "pool_shares",
        sa.Column("pool_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("cpu_milli", sa.BigInteger(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_pool_shares_pool_id_pools"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_pool_shares_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("pool_id", "tenant_id", name=op.f("pk_pool_shares")),
    )  # fmt: skip
    op.create_index(op.f("ix_pool_shares_tenant_id"), "pool_shares", ["tenant_id"])
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("default_pool", sa.String(length=64), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pool", sa.String(length=64), nullable=True))
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("borrowed", sa.Boolean(), server_default="0", nullable=False))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        for table in HISTORY_TABLES:
            column = _HISTORY_COLUMNS.get(table.name)
            if column is None:
                continue
            for piece in sorted(detached_slices(connection, table)):
                name = table.partition(piece)
                op.execute(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS {column}')


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("borrowed")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("pool")
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("default_pool")
    op.drop_index(op.f("ix_pool_shares_tenant_id"), table_name="pool_shares")
    op.drop_table("pool_shares")
    op.drop_table("pools")
