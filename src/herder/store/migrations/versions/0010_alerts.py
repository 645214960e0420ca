"""alerts: channels, rules, incidents, deliveries; runs and workflow runs by end time

Not online: indexes on runs and workflow_runs are built in one statement each.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import JsonColumn, UtcDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
online = False

ID = sa.String(length=40)
# The alert evaluator's reads of what ended: only ended rows are in them.
ENDED_INDEXES = [
    ("ix_runs_tenant_id_job_id_finished_at", "runs", ["tenant_id", "job_id", "finished_at"]),
    ("ix_workflow_runs_tenant_id_finished_at", "workflow_runs", ["tenant_id", "finished_at"]),
]


def upgrade() -> None:
    op.create_table(
        "alert_channels",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_alert_channels_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_channels")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_alert_channels_tenant_id_name")),
    )
    op.create_index(op.f("ix_alert_channels_tenant_id_id"), "alert_channels", ["tenant_id", "id"])
    op.create_table(
        "alert_rules",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("params", JsonColumn, nullable=False),
        sa.Column("channel_ids", JsonColumn, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("notify_recovery", sa.Boolean(), nullable=False),
        sa.Column("evaluated_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_alert_rules_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_rules")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_alert_rules_tenant_id_name")),
    )
    op.create_index(op.f("ix_alert_rules_tenant_id_id"), "alert_rules", ["tenant_id", "id"])
    op.create_table(
        "alert_incidents",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("rule_id", ID, nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("open_key", sa.String(length=200), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("details", JsonColumn, nullable=False),
        sa.Column("opened_at", UtcDateTime(), nullable=False),
        sa.Column("last_seen_at", UtcDateTime(), nullable=False),
        sa.Column("resolved_at", UtcDateTime(), nullable=True),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_alert_incidents_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_incidents")),
        sa.UniqueConstraint("open_key", name=op.f("uq_alert_incidents_open_key")),
    )
    op.create_index(op.f("ix_alert_incidents_tenant_id_id"), "alert_incidents", ["tenant_id", "id"])
    op.create_index(
        op.f("ix_alert_incidents_rule_id_state"), "alert_incidents", ["rule_id", "state"]
    )
    op.create_table(
        "alert_deliveries",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("channel_id", ID, nullable=False),
        sa.Column("incident_id", ID, nullable=True),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", UtcDateTime(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("history", JsonColumn, nullable=False),
        sa.Column("payload", JsonColumn, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("delivered_at", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_alert_deliveries_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_deliveries")),
    )
    op.create_index(
        op.f("ix_alert_deliveries_tenant_id_id"), "alert_deliveries", ["tenant_id", "id"]
    )
    op.create_index(
        op.f("ix_alert_deliveries_channel_id_id"), "alert_deliveries", ["channel_id", "id"]
    )
    op.create_index(
        op.f("ix_alert_deliveries_next_attempt_at"), "alert_deliveries", ["next_attempt_at"]
    )
    for name, table, columns in ENDED_INDEXES:
        ended = sa.text("finished_at IS NOT NULL")
        op.create_index(name, table, columns, postgresql_where=ended, sqlite_where=ended)


def downgrade() -> None:
    for name, table, _ in ENDED_INDEXES:
        op.drop_index(name, table_name=table)
    for table in ("alert_deliveries", "alert_incidents", "alert_rules", "alert_channels"):
        op.drop_table(table)
