"""artifacts.location: where an artifact's bytes are — the blob store, under
``artifacts/<tenant>/<sha256>``, for every upload from now on, or ``blobs`` for those uploaded
before, until ``herder system move-artifacts`` moves them (issue 45). The foreign key from
``artifacts`` to ``blobs`` goes (an artifact in the blob store has no row there), and an index
on ``artifacts.sha256`` says at once whether a digest's bytes are still kept in ``blobs``.

Online: on PostgreSQL the column (a constant default: no row is rewritten) and the foreign
key's drop are one change of the catalogue in a transaction that waits at most a second for
its locks, tried again after; the index is built concurrently, never blocking writes. The
release before runs on the schema: its uploads are rows the default places in ``blobs``,
which this release reads. It cannot read the bytes of an artifact this release put in the
blob store: until every API process runs this release, a worker that fetches one from an
older process is answered 404 (its attempt fails and is retried), and the move is run once
no older server is left (docs/configuration.md, "Where programs live").

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from herder.store.history.brief_transactions import in_brief_transaction

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None
online = True

FOREIGN_KEY = "fk_artifacts_sha256_blobs"
INDEX = "ix_artifacts_sha256"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("artifacts", schema=None) as batch_op:
            batch_op.drop_constraint(FOREIGN_KEY, type_="foreignkey")
            batch_op.add_column(
                sa.Column(
                    "location", sa.String(length=16), server_default="database", nullable=False
                )
            )
            batch_op.create_index(INDEX, ["sha256"], unique=False)
        return
    with op.get_context().autocommit_block():
        in_brief_transaction(
            op.get_bind().engine,
            lambda connection: connection.exec_driver_sql(
                f"ALTER TABLE artifacts DROP CONSTRAINT IF EXISTS {FOREIGN_KEY},"
                " ADD COLUMN IF NOT EXISTS location VARCHAR(16) DEFAULT 'database' NOT NULL"
            ),
        )
        invalid = op.get_bind().execute(
            sa.text("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(:name)"
                    " AND NOT indisvalid"),
            {"name": INDEX},
        ).first()  # fmt: skip
        if invalid is not None:  # an interrupted build's: built again
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON artifacts (sha256)")


def downgrade() -> None:
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.drop_index(INDEX)
        batch_op.drop_column("location")
        batch_op.create_foreign_key(FOREIGN_KEY, "blobs", ["sha256"], ["sha256"])
