"""schedules

Online: new tables only.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herder.store.types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("paused", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("next_due_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("last_fired_for", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("fired_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("missed_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("skipped_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_schedules_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_schedules_partition_next_due_at"),
            ["partition", "next_due_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_schedules_tenant_id_id"), ["tenant_id", "id"], unique=False
        )

    op.create_table(
        "schedule_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("schedule_id", sa.String(length=40), nullable=False),
        sa.Column("at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("scheduled_for", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_events_schedule_id_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_events")),
    )
    with op.batch_alter_table("schedule_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_schedule_events_schedule_id_id"), ["schedule_id", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("schedule_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedule_events_schedule_id_id"))

    op.drop_table("schedule_events")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedules_tenant_id_id"))
        batch_op.drop_index(batch_op.f("ix_schedules_partition_next_due_at"))

    op.drop_table("schedules")
