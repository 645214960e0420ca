"""placement_settings: a version that moves with every change to tenants, pools, pool shares
and budgets (triggers on those tables), so a dispatcher's pass reads one number instead of
them all when nothing changed (issue 44)

Online: a new table of one row and statement triggers; the tables they watch are written only
by hand (an administrator's call), and an older server's writes move the version too.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None
online = True

WATCHED = ("tenants", "pools", "pool_shares", "tenant_budgets")
MOVE = "UPDATE placement_settings SET version = version + 1 WHERE id = 1"


def upgrade() -> None:
    op.create_table(
        "placement_settings",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placement_settings")),
    )
    op.execute("INSERT INTO placement_settings (id, version) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION herder_placement_settings_moved() RETURNS trigger "
            f"LANGUAGE plpgsql AS $$ BEGIN {MOVE}; RETURN NULL; END $$"
        )
        for table in WATCHED:
            op.execute(
                f"CREATE TRIGGER {table}_move_placement_settings "
                f"AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION herder_placement_settings_moved()"
            )
        return
    for table in WATCHED:  # SQLite: row triggers only
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_{event.lower()}_moves_placement_settings "
                f"AFTER {event} ON {table} BEGIN {MOVE}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in WATCHED:
            op.execute(f"DROP TRIGGER {table}_move_placement_settings ON {table}")
        op.execute("DROP FUNCTION herder_placement_settings_moved()")
    else:
        for table in WATCHED:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_{event}_moves_placement_settings")
    op.drop_table("placement_settings")
