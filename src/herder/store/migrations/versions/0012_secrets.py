"""secrets: a tenant's named values, sealed with the server's key

Online: a new table.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.types import UtcDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
online = True

ID = sa.String(length=40)


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_secrets_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "name", name=op.f("pk_secrets")),
    )
    op.create_index(op.f("ix_secrets_key_id"), "secrets", ["key_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_secrets_key_id"), table_name="secrets")
    op.drop_table("secrets")
