"""job_labels.tenant_id: the job's tenant on each of its labels, and an index led by
(tenant_id, key, value) in place of (key, value), so that a tenant's jobs listing filtered by
a label reads that tenant's rows with the label alone. Before, PostgreSQL had two ways, both
wider: every tenant's rows with the label through (key, value), the others' dropped after
(``env=prod``: a third of a cell's), or a probe of the primary key for each of the tenant's
jobs, labelled or not (bench/definitions.py). The index leaves ``job_id`` out: its entries
then repeat, and PostgreSQL keeps each (tenant, key, value) once with its rows' places —
23 MB for 1.5 million labels, where ``job_id`` in it made 152 MB (and (key, value) 10 MB).

Online: on PostgreSQL the column is nullable, a change of the catalogue alone, made with
the trigger below in one transaction that waits at most a second for its locks; the rows
already there get theirs in batches of ``BATCH_ROWS``, walked along the primary key, each
batch its own transaction that gives way to the servers' (``ROW_LOCK_TIMEOUT``); the new
index is built, and the old one dropped, concurrently. Interrupted, it goes on when run again.

The release before runs on the schema: it writes labels without ``tenant_id``. A trigger
fills it from the label's job as the row is inserted (only then: ``WHEN tenant_id IS NULL``,
so this release's own writes never call it), so every label carries its tenant once this
migration is done, and this release's filter needs no fallback for rows missing theirs. The
trigger is made before the batches start: making it waits for every transaction inserting
labels, so none written without it is left behind the batches. A filter that also matched
NULL rows through the job would keep the cross-tenant scan this migration removes. The
release before, reading, no longer has (key, value): it filters a tenant's jobs through the
primary key (job_id, key), one probe a job of the tenant's, which costs the tenant's jobs.
A later release, once none before this one runs, makes the column NOT NULL and drops the
trigger. The column has no foreign key to ``tenants``: it is the job's, which has one.

SQLite (one process's file) adds the column, an ``AFTER INSERT`` trigger doing the same, and
fills the rows in one statement.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-07
"""

from __future__ import annotations

from functools import partial

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

from herder.store.history.brief_transactions import ROW_LOCK_TIMEOUT, in_brief_transaction

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None
online = True

TRIGGER = "job_labels_take_tenant"
INDEX = "ix_job_labels_tenant_id_key_value"
OLD_INDEX = "ix_job_labels_key_value"
BATCH_ROWS = 5_000  # labels given their tenant a transaction

POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant_id := (SELECT tenant_id FROM jobs WHERE id = NEW.job_id);
    RETURN NEW;
END
$$"""
POSTGRES_TRIGGER = (
    f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON job_labels FOR EACH ROW"
    f" WHEN (NEW.tenant_id IS NULL) EXECUTE FUNCTION {TRIGGER}()"
)
SQLITE_TRIGGER = f"""
CREATE TRIGGER IF NOT EXISTS {TRIGGER} AFTER INSERT ON job_labels
FOR EACH ROW WHEN NEW.tenant_id IS NULL
BEGIN
    UPDATE job_labels SET tenant_id = (SELECT tenant_id FROM jobs WHERE id = NEW.job_id)
    WHERE job_id = NEW.job_id AND key = NEW.key;
END"""
# The next batch of labels after (:job_id, :key) along the primary key: those without a
# tenant get their job's; the batch's last label comes back (none: the walk is done).
FILL_BATCH = """
WITH batch AS (
    SELECT job_id, key FROM job_labels WHERE (job_id, key) > (:job_id, :key)
    ORDER BY job_id, key LIMIT :rows
), filled AS (
    UPDATE job_labels AS label SET tenant_id = job.tenant_id FROM batch, jobs AS job
    WHERE label.job_id = batch.job_id AND label.key = batch.key
      AND label.tenant_id IS NULL AND job.id = label.job_id
)
SELECT job_id, key FROM batch ORDER BY job_id DESC, key DESC LIMIT 1"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.add_column("job_labels", sa.Column("tenant_id", sa.String(length=40), nullable=True))
        op.execute(SQLITE_TRIGGER)
        op.execute(
            "UPDATE job_labels SET tenant_id ="
            " (SELECT tenant_id FROM jobs WHERE jobs.id = job_labels.job_id)"
        )
        op.create_index(INDEX, "job_labels", ["tenant_id", "key", "value"])
        op.drop_index(OLD_INDEX, table_name="job_labels")
        return
    with op.get_context().autocommit_block():
        engine = op.get_bind().engine
        in_brief_transaction(engine, _add_column_and_trigger)
        after: tuple[str, str] | None = ("", "")
        while after is not None:
            after = in_brief_transaction(
                engine, partial(_fill_batch, after=after), ROW_LOCK_TIMEOUT
            )
        invalid = op.get_bind().execute(
            sa.text("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(:name)"
                    " AND NOT indisvalid"),
            {"name": INDEX},
        ).first()  # fmt: skip
        if invalid is not None:  # an interrupted build's: built again
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON job_labels (tenant_id, key, value)"
        )
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {OLD_INDEX}")


def _add_column_and_trigger(connection: Connection) -> None:
    connection.exec_driver_sql(
        "ALTER TABLE job_labels ADD COLUMN IF NOT EXISTS tenant_id VARCHAR(40)"
    )
    connection.exec_driver_sql(POSTGRES_FUNCTION)
    connection.exec_driver_sql(f"DROP TRIGGER IF EXISTS {TRIGGER} ON job_labels")
    connection.exec_driver_sql(POSTGRES_TRIGGER)


def _fill_batch(connection: Connection, after: tuple[str, str]) -> tuple[str, str] | None:
    job_id, key = after
    last = connection.execute(
        sa.text(FILL_BATCH), {"job_id": job_id, "key": key, "rows": BATCH_ROWS}
    ).first()
    return None if last is None else (last.job_id, last.key)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON job_labels")
        op.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}()")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    op.create_index(OLD_INDEX, "job_labels", ["key", "value"])
    op.drop_index(INDEX, table_name="job_labels")
    with op.batch_alter_table("job_labels", schema=None) as batch_op:
        batch_op.drop_column("tenant_id")
