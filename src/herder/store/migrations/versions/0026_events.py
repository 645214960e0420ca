"""events, triggers, hooks, hook_deliveries, run_waits: work started by events, and
workflow tasks that wait for them (issue 27)

Online: new tables.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import JsonColumn, UtcDateTime

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None
online = True


def _owned(name: str, *columns: sa.Column) -> None:  # type: ignore[type-arg]
    """A tenant's named definition: id, tenant, name unique per tenant, times, version."""
    op.create_table(
        name,
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        *columns,
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f(f"fk_{name}_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{name}")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f(f"uq_{name}_tenant_id_name")),
    )


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("sender_id", sa.String(length=128), nullable=True),
        sa.Column("sender_key", sa.String(length=200), nullable=True),
        sa.Column("payload", JsonColumn, nullable=False),
        sa.Column("outcomes", JsonColumn, nullable=False),
        sa.Column("resumed", JsonColumn, nullable=True),
        sa.Column("received_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_events_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("tenant_id", "sender_key", name=op.f("uq_events_tenant_id_sender_key")),
    )
    op.create_index(op.f("ix_events_tenant_id_id"), "events", ["tenant_id", "id"])
    op.create_index(op.f("ix_events_tenant_id_name_id"), "events", ["tenant_id", "name", "id"])
    op.create_index(op.f("ix_events_received_at"), "events", ["received_at"])
    _owned(
        "triggers",
        sa.Column("event", sa.String(length=128), nullable=False),
        sa.Column("spec", JsonColumn, nullable=False),
    )
    op.create_index(op.f("ix_triggers_tenant_id_event"), "triggers", ["tenant_id", "event"])
    _owned(
        "hooks",
        sa.Column("spec", JsonColumn, nullable=False),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "hook_deliveries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("hook_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("delivery_id", sa.String(length=128), nullable=True),
        sa.Column("signed_at", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=True),
        sa.Column("event_id", sa.String(length=40), nullable=True),
        sa.Column("received_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hook_deliveries")),
    )
    op.create_index(op.f("ix_hook_deliveries_hook_id_id"), "hook_deliveries", ["hook_id", "id"])
    op.create_index(
        op.f("ix_hook_deliveries_hook_id_delivery_id"),
        "hook_deliveries",
        ["hook_id", "delivery_id"],
    )
    op.create_index(op.f("ix_hook_deliveries_received_at"), "hook_deliveries", ["received_at"])
    op.create_table(
        "run_waits",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("event_name", sa.String(length=128), nullable=False),
        sa.Column("filter", sa.String(length=2048), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_waits")),
    )
    op.create_index(
        op.f("ix_run_waits_tenant_id_event_name"), "run_waits", ["tenant_id", "event_name"]
    )


def downgrade() -> None:
    op.drop_table("run_waits")
    op.drop_table("hook_deliveries")
    op.drop_table("hooks")
    op.drop_index(op.f("ix_triggers_tenant_id_event"), table_name="triggers")
    op.drop_table("triggers")
    op.drop_table("events")
