"""workflows

Not online: a unique index on runs is built in one statement.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herder.store.types

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:

    op.create_table(
        "workflow_versions",
        sa.Column("workflow_id", sa.String(length=40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workflow_id", "version", name=op.f("pk_workflow_versions")),
    )
    op.create_table(
        "workflow_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("workflow_id", sa.String(length=40), nullable=False),
        sa.Column("workflow_name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column(
            "params",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "jobs",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("schedule_id", sa.String(length=40), nullable=True),
        sa.Column("scheduled_for", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("backfill_id", sa.String(length=40), nullable=True),
        sa.Column("repair", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "repaired_tasks",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("cancel_requested", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("started_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_workflow_runs_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_runs")),
        sa.UniqueConstraint(
            "schedule_id", "scheduled_for", name=op.f("uq_workflow_runs_schedule_id_scheduled_for")
        ),
        sa.UniqueConstraint(
            "tenant_id", "idempotency_key", name=op.f("uq_workflow_runs_tenant_id_idempotency_key")
        ),
    )
    with op.batch_alter_table("workflow_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workflow_runs_tenant_id_id"), ["tenant_id", "id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_workflow_runs_tenant_id_workflow_id_id"),
            ["tenant_id", "workflow_id", "id"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_workflow_runs_workflow_id_state_id"),
            ["workflow_id", "state", "id"],
            unique=False,
        )

    op.create_table(
        "workflows",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_workflows_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflows")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_workflows_tenant_id_name")),
    )
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workflows_tenant_id_id"), ["tenant_id", "id"], unique=False
        )

    op.create_table(
        "backfills",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("schedule_id", sa.String(length=40), nullable=False),
        sa.Column("start", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("end", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("max_active", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("cursor", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("started", sa.Integer(), server_default="0", nullable=False),
        sa.Column("already_run", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", herder.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", herder.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_backfills_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfills")),
    )
    with op.batch_alter_table("backfills", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_backfills_tenant_id_id"), ["tenant_id", "id"])
        batch_op.create_index(batch_op.f("ix_backfills_schedule_id_id"), ["schedule_id", "id"])

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workflow_run_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("backfill_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("task_name", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("map_index", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("repair", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column(
                "map_item",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch_op.add_column(
            sa.Column(
                "inputs",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch_op.add_column(
            sa.Column(
                "output",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch_op.create_index(
            batch_op.f("ix_runs_workflow_run_id_task_name_map_index_repair"),
            ["workflow_run_id", "task_name", "map_index", "repair"],
            unique=True,
        )

    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workflow_id", sa.String(length=40), nullable=True))
        batch_op.alter_column("job_id", existing_type=sa.VARCHAR(length=40), nullable=True)


def downgrade() -> None:

    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.alter_column("job_id", existing_type=sa.VARCHAR(length=40), nullable=False)
        batch_op.drop_column("workflow_id")

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_workflow_run_id_task_name_map_index_repair"))
        batch_op.drop_column("output")
        batch_op.drop_column("inputs")
        batch_op.drop_column("map_item")
        batch_op.drop_column("repair")
        batch_op.drop_column("map_index")
        batch_op.drop_column("task_name")
        batch_op.drop_column("workflow_run_id")
        batch_op.drop_column("backfill_id")

    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflows_tenant_id_id"))

    op.drop_table("workflows")
    with op.batch_alter_table("workflow_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflow_runs_workflow_id_state_id"))
        batch_op.drop_index(batch_op.f("ix_workflow_runs_tenant_id_workflow_id_id"))
        batch_op.drop_index(batch_op.f("ix_workflow_runs_tenant_id_id"))

    op.drop_table("workflow_runs")
    op.drop_table("workflow_versions")
    op.drop_table("backfills")
