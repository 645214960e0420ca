"""placement

Not online: attempts' unique key is rebuilt, and running attempts updated, in one statement
each.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herder.store.types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rank", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(
            sa.Column(
                "gpu_indices",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch_op.add_column(
            sa.Column("delivered_at", herder.store.types.UtcDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                "preempt_requested_at", herder.store.types.UtcDateTime(timezone=True), nullable=True
            )
        )
        batch_op.drop_constraint(batch_op.f("uq_attempts_run_id_number"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_attempts_run_id_number_rank"), ["run_id", "number", "rank"]
        )

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("replicas", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(
            sa.Column(
                "requires",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch_op.add_column(
            sa.Column("preemptible", sa.Boolean(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("preemptions", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("preempted_at", herder.store.types.UtcDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("waiting_reason", sa.Text(), nullable=True))

    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("address", sa.String(length=255), server_default="", nullable=False)
        )

    # Attempts running at the upgrade were claimed the old way, so they have been handed over
    # already: a claim must not hand them over again. (Runs from before have no replicas,
    # requirements or preemptible flag in their spec, so the column defaults are theirs.)
    op.execute("UPDATE attempts SET delivered_at = started_at WHERE state = 'running'")


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("address")

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("waiting_reason")
        batch_op.drop_column("preempted_at")
        batch_op.drop_column("preemptions")
        batch_op.drop_column("preemptible")
        batch_op.drop_column("requires")
        batch_op.drop_column("replicas")

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_attempts_run_id_number_rank"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_attempts_run_id_number"), ["run_id", "number"]
        )
        batch_op.drop_column("preempt_requested_at")
        batch_op.drop_column("delivered_at")
        batch_op.drop_column("gpu_indices")
        batch_op.drop_column("rank")
