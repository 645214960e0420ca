"""checkpoints and checkpoint_chunks: a run's last saved checkpoint directory, its bytes
addressed by content within a tenant; attempts.checkpoint_refused: why an attempt's end saved
none (issue 24)

On PostgreSQL the column reaches the attached slices of ``attempts`` through the partitioned
table; a slice detached and not yet exported to the cold tier gets it too, since the export
reads a slice as the table's columns.

Online: new tables and a nullable column.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.types import UtcDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("stored_bytes", sa.BigInteger(), nullable=False),
        sa.Column("saved_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_checkpoints_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_checkpoints")),
    )
    op.create_index(op.f("ix_checkpoints_tenant_id_sha256"), "checkpoints", ["tenant_id", "sha256"])
    op.create_index(op.f("ix_checkpoints_expires_at"), "checkpoints", ["expires_at"])
    op.create_table(
        "checkpoint_chunks",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "sha256", "seq", name=op.f("pk_checkpoint_chunks")),
    )
    if op.get_bind().dialect.name == "postgresql":  # gzip'd already: no TOAST compression
        op.execute("ALTER TABLE checkpoint_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checkpoint_refused", sa.Text(), nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        attempts = next(table for table in HISTORY_TABLES if table.name == "attempts")
        for piece in sorted(detached_slices(connection, attempts)):
            name = attempts.partition(piece)
            op.execute(f'ALTER TABLE "{name}" ADD COLUMN IF NOT EXISTS checkpoint_refused TEXT')


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("checkpoint_refused")
    op.drop_table("checkpoint_chunks")
    op.drop_index(op.f("ix_checkpoints_expires_at"), table_name="checkpoints")
    op.drop_index(op.f("ix_checkpoints_tenant_id_sha256"), table_name="checkpoints")
    op.drop_table("checkpoints")
