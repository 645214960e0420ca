"""job_notices and limit_notices: a job's notices (issue 46 §3) — a person's subscription to
a job's failures, time-outs, missed deadlines and approvals, made of a channel and rules of
the existing kinds marked ``managed_by`` it — and the runs stopped at the 24-hour limit whose
owner was told, once each.

Online: two new tables, and a nullable column on each of ``alert_channels`` and
``alert_rules`` (a change of the catalogue alone); the release before neither reads nor
writes them, and a rule or channel it changes keeps its mark.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import JsonColumn, UtcDateTime

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.add_column("alert_channels", sa.Column("managed_by", sa.String(length=40), nullable=True))
    op.add_column("alert_rules", sa.Column("managed_by", sa.String(length=40), nullable=True))
    op.create_table(
        "job_notices",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("subscriber", sa.String(length=128), nullable=False),
        sa.Column("events", JsonColumn, nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_job_notices_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_notices")),
        sa.UniqueConstraint("job_id", "subscriber", name=op.f("uq_job_notices_job_id_subscriber")),
    )
    op.create_index(op.f("ix_job_notices_tenant_id_job_id"), "job_notices", ["tenant_id", "job_id"])
    op.create_table(
        "limit_notices",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("told", sa.String(length=16), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_limit_notices_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_limit_notices")),
    )


def downgrade() -> None:
    op.drop_table("limit_notices")
    op.drop_index(op.f("ix_job_notices_tenant_id_job_id"), table_name="job_notices")
    op.drop_table("job_notices")
    op.drop_column("alert_rules", "managed_by")
    op.drop_column("alert_channels", "managed_by")
