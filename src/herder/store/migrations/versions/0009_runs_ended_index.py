"""runs by tenant and end time, for the overview's recent window

Not online: an index on runs is built in one statement.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
online = False


def upgrade() -> None:
    op.create_index(
        "ix_runs_tenant_id_finished_at",
        "runs",
        ["tenant_id", "finished_at"],
        postgresql_where=sa.text("finished_at IS NOT NULL"),
        sqlite_where=sa.text("finished_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_tenant_id_finished_at", table_name="runs")
