"""retries, deadlines and reruns

Not online: indexes on runs and attempts are built in one statement, which blocks their writers
while it runs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herder.store.types

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("deadline_at", herder.store.types.UtcDateTime(timezone=True), nullable=True)
        )
        batch_op.create_index(
            batch_op.f("ix_attempts_state_deadline_at"), ["state", "deadline_at"], unique=False
        )

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("retry_at", herder.store.types.UtcDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                "start_deadline", herder.store.types.UtcDateTime(timezone=True), nullable=True
            )
        )
        batch_op.add_column(sa.Column("rerun_of", sa.String(length=40), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_runs_state_retry_at"), ["state", "retry_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_runs_state_start_deadline"), ["state", "start_deadline"], unique=False
        )

    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workers_state_last_heartbeat_at"),
            ["state", "last_heartbeat_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workers_state_last_heartbeat_at"))

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_state_start_deadline"))
        batch_op.drop_index(batch_op.f("ix_runs_state_retry_at"))
        batch_op.drop_column("rerun_of")
        batch_op.drop_column("start_deadline")
        batch_op.drop_column("retry_at")

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attempts_state_deadline_at"))
        batch_op.drop_column("deadline_at")
