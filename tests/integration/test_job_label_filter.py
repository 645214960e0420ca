"""A tenant's jobs filtered by a label: every label carries its job's tenant (0035), so the
filter reads the tenant's own labels. Labels the release before wrote without a tenant —
before the migration, and beside it during a rolling upgrade — are found all the same. On
both stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import func, select, text

from herder.app import moves
from herder.domain.jobs import JobSpec
from herder.domain.moves import MoveState
from herder.settings import sqlite_url
from herder.store.database import Database
from herder.store.jobs import JobEdit
from herder.store.migrations import alembic_config
from herder.store.schema import job_labels
from herder.store.store import Store
from tests.clones import database_at_revision
from tests.conftest import TEST_KEYRING
from tests.integration.conftest import Api
from tests.integration.test_tenant_moves import other_cell  # noqa: F401

MADE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
BATCH_ROWS = 5_000  # 0035's labels a transaction
TENANT = "ten_before"


def spec(**labels: str) -> JobSpec:
    return JobSpec(runtime="shell", command="true", labels=labels)


def labelled(store: Store, tenant_id: str, **labels: str) -> list[str]:
    return sorted(job.name for job in store.jobs.list(tenant_id, labels=labels).items)


def label_tenants(store: Store) -> dict[tuple[str, str], str | None]:
    """Each label's (job, key) → the tenant it carries."""
    with store.database.read() as connection:
        rows = connection.execute(
            select(job_labels.c.job_id, job_labels.c.key, job_labels.c.tenant_id)
        )
        return {(row.job_id, row.key): row.tenant_id for row in rows}


def test_a_tenant_finds_its_own_jobs_with_the_label_and_no_one_elses(store: Store) -> None:
    ours = store.access.create_tenant("ours").id
    theirs = store.access.create_tenant("theirs").id
    store.jobs.create(ours, "report", spec(env="prod", team="data"))
    store.jobs.create(ours, "backup", spec(env="staging"))
    store.jobs.create(theirs, "report", spec(env="prod", team="data"))

    assert labelled(store, ours, env="prod") == ["report"]
    assert labelled(store, ours, env="prod", team="data") == ["report"]
    assert labelled(store, theirs, env="staging") == []
    assert labelled(store, theirs, env="prod") == ["report"]


def test_every_label_written_carries_its_jobs_tenant(store: Store) -> None:
    tenant = store.access.create_tenant("ours").id
    job = store.jobs.create(tenant, "report", spec(env="prod"))
    store.jobs.edit(tenant, job.id, lambda now: JobEdit(now.name, spec(env="dev", team="a")))

    assert label_tenants(store) == {(job.id, "env"): tenant, (job.id, "team"): tenant}
    assert labelled(store, tenant, env="dev") == ["report"]
    assert labelled(store, tenant, env="prod") == []


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def at_0034(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database at revision 0034, before labels carried their tenant; each store."""
    if request.param == "sqlite":
        database = Database(sqlite_url(tmp_path / "herder.db"))
        command.upgrade(alembic_config(database), "0034")
        yield database
        database.dispose()
        return
    with database_at_revision("job_label_migration", "0034") as database:
        yield database


def write_as_the_release_before(database: Database, job_id: str, **labels: str) -> None:
    """A job of ``TENANT`` and its labels as the release before 0035 inserts them: without
    the labels' tenant."""
    with database.write() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (id, tenant_id, name, spec, created_at, updated_at, version)"
                " VALUES (:id, :tenant, :id, :spec, :made, :made, 1)"
            ),
            {
                "id": job_id,
                "tenant": TENANT,
                "spec": spec(**labels).model_dump_json(),
                "made": MADE,
            },
        )
        connection.execute(
            text("INSERT INTO job_labels (job_id, key, value) VALUES (:job, :key, :value)"),
            [{"job": job_id, "key": key, "value": value} for key, value in labels.items()],
        )


def add_tenant(database: Database) -> None:
    with database.write() as connection:
        connection.execute(
            text(
                "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
                " VALUES (:tenant, 'before', 1, false, '{}', :made)"
            ),
            {"tenant": TENANT, "made": MADE},
        )


def test_labels_written_before_the_migration_and_beside_it_are_found(
    at_0034: Database,
) -> None:
    add_tenant(at_0034)
    write_as_the_release_before(at_0034, "job_before", env="prod")
    at_0034.migrate()
    write_as_the_release_before(at_0034, "job_beside", env="prod", team="data")

    store = Store(at_0034.url, keyring=TEST_KEYRING)
    try:
        assert set(label_tenants(store).values()) == {TENANT}
        assert labelled(store, TENANT, env="prod") == ["job_before", "job_beside"]
        assert labelled(store, TENANT, team="data") == ["job_beside"]
        other = store.access.create_tenant("other").id
        assert labelled(store, other, env="prod") == []
    finally:
        store.close()


@pytest.mark.postgres
def test_more_labels_than_a_batch_all_get_their_tenant(postgres_template: str) -> None:
    with database_at_revision("job_label_batches", "0034") as database:
        add_tenant(database)
        with database.write() as connection:
            connection.execute(
                text(
                    "INSERT INTO jobs (id, tenant_id, name, spec, created_at, updated_at,"
                    " version) SELECT 'job_' || n, :tenant, 'job-' || n, '{}', now(), now(), 1"
                    " FROM generate_series(1, :jobs) AS n"
                ),
                {"tenant": TENANT, "jobs": BATCH_ROWS + 1},
            )
            connection.execute(
                text(
                    "INSERT INTO job_labels (job_id, key, value)"
                    " SELECT id, label, 'x' FROM jobs, (VALUES ('a'), ('b')) AS labels(label)"
                )
            )
        database.migrate()
        with database.read() as connection:
            tenants = connection.execute(
                select(job_labels.c.tenant_id, func.count()).group_by(job_labels.c.tenant_id)
            ).all()
        assert [tuple(row) for row in tenants] == [(TENANT, 2 * (BATCH_ROWS + 1))]


def test_a_moved_tenants_jobs_are_found_by_label_in_the_cell_it_arrives_in(
    api: Api,
    other_cell: Store,  # noqa: F811
) -> None:
    tenant_id = api.store.access.create_tenant("mover").id
    api.store.jobs.create(tenant_id, "report", spec(env="prod"))
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    document = api.store.moves.export(tenant_id).model_copy(update={"from_cell": "a"})
    moves.import_tenant(other_cell, document)

    assert labelled(other_cell, tenant_id, env="prod") == ["report"]
