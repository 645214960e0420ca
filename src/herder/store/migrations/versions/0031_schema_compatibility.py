"""schema_compatibility: the oldest revision whose servers may run on the schema, so old and
new releases serve side by side during a rolling upgrade (issue 43)

Online: a new table of one row.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    op.create_table(
        "schema_compatibility",
        sa.Column("oldest_server", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("oldest_server", name=op.f("pk_schema_compatibility")),
    )


def downgrade() -> None:
    op.drop_table("schema_compatibility")
