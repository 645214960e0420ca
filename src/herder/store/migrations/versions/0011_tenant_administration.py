"""tenant administration: API keys' expiry and last use; the audit log

Online: nullable columns and a new table.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import JsonColumn, UtcDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
online = True

ID = sa.String(length=40)


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expires_at", UtcDateTime(), nullable=True))
        batch_op.add_column(sa.Column("last_used_at", UtcDateTime(), nullable=True))
    op.create_table(
        "audit_log",
        sa.Column("id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("key_id", ID, nullable=False),
        sa.Column("key_name", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=128), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("route", sa.String(length=255), nullable=False),
        sa.Column("object_type", sa.String(length=64), nullable=False),
        sa.Column("object_id", sa.String(length=255), nullable=True),
        sa.Column("fields", JsonColumn, nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_audit_log_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_tenant_id_id"), "audit_log", ["tenant_id", "id"])
    op.create_index(
        op.f("ix_audit_log_tenant_id_object_id_id"), "audit_log", ["tenant_id", "object_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("audit_log")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("last_used_at")
        batch_op.drop_column("expires_at")
