"""tenants.move_state and move_cell: a tenant's move between cells (issue 45): frozen in the
cell it leaves, moved once the directory names the other its home, arriving in the cell it
goes to until then; NULL, as every tenant has, is a tenant at home.

Online: two nullable columns with no default, a change of the catalogue alone (no row is
rewritten), on PostgreSQL in a transaction that waits at most a second for its lock, tried
again after. The release before runs on the schema: it never moves a tenant, and reads
tenants by their columns' names.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.brief_transactions import in_brief_transaction

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None
online = True


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            in_brief_transaction(
                op.get_bind().engine,
                lambda connection: connection.exec_driver_sql(
                    "ALTER TABLE tenants ADD COLUMN IF NOT EXISTS move_state VARCHAR(16),"
                    " ADD COLUMN IF NOT EXISTS move_cell VARCHAR(63)"
                ),
            )
        return
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("move_state", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("move_cell", sa.String(length=63), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("move_cell")
        batch_op.drop_column("move_state")
