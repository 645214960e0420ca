"""Programs uploaded before revision 0033, whose bytes are in the database (``blobs``): still
served to their tenant and to the workers that run them, and moved to the blob store by
``herder system move-artifacts`` — checked first, one at a time, safe to stop and run again,
the database's copy deleted only once no tenant's row keeps it. On both stores."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import func, insert, select, text

from herder.app.artifacts import move_to_blob_store
from herder.domain.artifacts import artifact_key
from herder.domain.errors import Unavailable
from herder.domain.models import Role
from herder.settings import sqlite_url
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.database import Database
from herder.store.migrations import alembic_config
from herder.store.schema import artifacts, blobs
from herder.store.store import Store
from tests.clones import database_at_revision
from tests.conftest import TEST_KEYRING
from tests.integration.conftest import Api, Herder
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_artifacts import upload
from tests.integration.test_worker_protocol import claim

OLD_PROGRAM = b"print('uploaded before the blob store')\n"
OLD_SHA256 = hashlib.sha256(OLD_PROGRAM).hexdigest()
MADE = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
TENANT = "ten_before"


def keep_in_database(
    database: Database, tenant_id: str, data: bytes, sha256: str | None = None
) -> str:
    """What the release before 0033 wrote for an upload: the bytes in ``blobs`` once, the
    tenant's row naming them (no location: the column's default, or no column yet)."""
    sha256 = sha256 or hashlib.sha256(data).hexdigest()
    with database.write() as connection:
        kept = connection.execute(select(blobs.c.sha256).where(blobs.c.sha256 == sha256)).first()
        if kept is None:
            connection.execute(insert(blobs).values(sha256=sha256, size=len(data), data=data))
        connection.execute(
            insert(artifacts).values(
                tenant_id=tenant_id, sha256=sha256, size=len(data), media_type="text/plain",
                filename="old.py", created_at=MADE,
            )
        )  # fmt: skip
    return sha256


def other_tenant(api: Api) -> tuple[str, str]:
    """A second tenant's id and admin key."""
    tenant = api.store.access.create_tenant("other")
    return tenant.id, api.store.access.create_api_key(tenant.id, Role.ADMIN, "test")[1]


def locations(store: Store) -> dict[tuple[str, str], str]:
    with store.database.read() as connection:
        rows = connection.execute(
            select(artifacts.c.tenant_id, artifacts.c.sha256, artifacts.c.location)
        ).all()
    return {(row.tenant_id, row.sha256): row.location for row in rows}


def database_copies(store: Store) -> list[str]:
    with store.database.read() as connection:
        return list(connection.execute(select(blobs.c.sha256).order_by(blobs.c.sha256)).scalars())


def test_a_program_in_the_database_is_served_and_fetched_by_its_worker(api: Api) -> None:
    keep_in_database(api.store.database, api.tenant_id, OLD_PROGRAM)
    content = api.http.get(f"/v1/artifacts/{OLD_SHA256}/content", headers=api.admin)
    assert content.status_code == 200
    assert content.content == OLD_PROGRAM
    worker_id = register_worker(api)
    job = api.create_job("old", runtime="python", command=None, artifact=OLD_SHA256)
    api.start_run(job["id"])
    claim(api, worker_id)
    fetched = api.http.get(
        f"/v1/workers/{worker_id}/artifacts/{OLD_SHA256}", headers=as_worker(worker_id)
    )
    assert fetched.content == OLD_PROGRAM


def test_the_move_takes_every_tenants_copy_to_the_blob_store_once(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    other_id, other_key = other_tenant(api)
    keep_in_database(api.store.database, api.tenant_id, OLD_PROGRAM)
    keep_in_database(api.store.database, other_id, OLD_PROGRAM)  # one ``blobs`` row for both
    second = keep_in_database(api.store.database, api.tenant_id, b"echo second\n")

    done = move_to_blob_store(api.store)

    assert (done.moved, done.damaged, done.forgotten) == (3, [], 0)
    assert set(locations(api.store).values()) == {"blob_store"}
    assert database_copies(api.store) == []
    for tenant_id, sha256 in [(api.tenant_id, OLD_SHA256), (other_id, OLD_SHA256)]:
        assert (artifact_blobs.root / artifact_key(tenant_id, sha256)).is_file()
    assert (artifact_blobs.root / artifact_key(api.tenant_id, second)).is_file()
    for key in (api.admin, api.as_key(other_key)):
        content = api.http.get(f"/v1/artifacts/{OLD_SHA256}/content", headers=key)
        assert content.content == OLD_PROGRAM
    again = move_to_blob_store(api.store)
    assert (again.moved, again.damaged, again.forgotten) == (0, [], 0)


def test_the_database_copy_stays_while_another_tenants_row_keeps_it(api: Api) -> None:
    other_id, other_key = other_tenant(api)
    keep_in_database(api.store.database, api.tenant_id, OLD_PROGRAM)
    keep_in_database(api.store.database, other_id, OLD_PROGRAM)
    assert api.store.artifacts.move(api.tenant_id, OLD_SHA256, OLD_PROGRAM)
    assert database_copies(api.store) == [OLD_SHA256]  # the other tenant's row still reads it
    content = api.http.get(f"/v1/artifacts/{OLD_SHA256}/content", headers=api.as_key(other_key))
    assert content.content == OLD_PROGRAM
    assert not api.store.artifacts.move(api.tenant_id, OLD_SHA256, OLD_PROGRAM)  # moved once
    assert api.store.artifacts.move(other_id, OLD_SHA256, OLD_PROGRAM)
    assert database_copies(api.store) == []


def test_a_move_stopped_part_way_goes_on_when_run_again(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = [f"print({number})\n".encode() for number in range(5)]
    for program in programs:
        keep_in_database(api.store.database, api.tenant_id, program)
    move = api.store.artifacts.move
    calls = 0

    def stopping(tenant_id: str, sha256: str, data: bytes) -> bool:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Unavailable("the blob store went away")
        return move(tenant_id, sha256, data)

    monkeypatch.setattr(api.store.artifacts, "move", stopping)
    with pytest.raises(Unavailable):
        move_to_blob_store(api.store)
    assert sorted(locations(api.store).values()).count("blob_store") == 2
    monkeypatch.setattr(api.store.artifacts, "move", move)
    assert move_to_blob_store(api.store).moved == 3
    for program in programs:
        sha256 = hashlib.sha256(program).hexdigest()
        content = api.http.get(f"/v1/artifacts/{sha256}/content", headers=api.admin)
        assert content.content == program


def test_bytes_that_are_not_their_sha256_are_left_and_named_until_uploaded_again(
    api: Api, herder: Herder, artifact_blobs: DirectoryBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = keep_in_database(api.store.database, api.tenant_id, b"print('changed')\n", OLD_SHA256)
    keep_in_database(api.store.database, api.tenant_id, b"echo fine\n")
    monkeypatch.setenv("HERDER_DATABASE_URL", api.store.database.url)
    monkeypatch.setenv("HERDER_COLD_STORE", artifact_blobs.root.as_uri())

    moved = herder("system", "move-artifacts")

    assert moved.exit_code == 1, moved.output
    assert "moved 1 artifact(s) from the database to the blob store" in moved.output
    assert f"{api.tenant_id}/{damaged}" in moved.output
    assert locations(api.store)[(api.tenant_id, damaged)] == "database"
    assert upload(api, OLD_PROGRAM).status_code == 201  # the right bytes, uploaded again
    assert locations(api.store)[(api.tenant_id, damaged)] == "blob_store"
    content = api.http.get(f"/v1/artifacts/{damaged}/content", headers=api.admin)
    assert content.content == OLD_PROGRAM
    again = herder("system", "move-artifacts")
    assert again.exit_code == 0, again.output
    assert "moved 0 artifact(s)" in again.output
    assert database_copies(api.store) == []


def test_reads_while_the_move_runs_always_get_the_bytes(api: Api) -> None:
    """A row is read with its database bytes in one statement: a move committing meanwhile
    is seen whole (the blob store's object) or not at all (the database's bytes)."""
    other_id, _ = other_tenant(api)
    programs = {f"print({number})\n".encode() for number in range(40)}
    for program in programs:
        for tenant_id in (api.tenant_id, other_id):
            keep_in_database(api.store.database, tenant_id, program)
    wrong: list[bytes] = []
    moving = threading.Event()

    def read_all() -> None:
        while moving.is_set():
            for program in programs:
                sha256 = hashlib.sha256(program).hexdigest()
                for tenant_id in (api.tenant_id, other_id):
                    _, content = api.store.artifacts.read(tenant_id, sha256)
                    got = b"".join(content)
                    if got != program:
                        wrong.append(got)

    moving.set()
    reader = threading.Thread(target=read_all, name="reader")
    reader.start()
    try:
        assert move_to_blob_store(api.store).moved == 2 * len(programs)
    finally:
        moving.clear()
        reader.join()
    assert wrong == []
    assert database_copies(api.store) == []


def test_a_database_row_no_artifact_names_is_deleted_by_the_move(api: Api) -> None:
    with api.store.database.write() as connection:
        connection.execute(insert(blobs).values(sha256="ab" * 32, size=1, data=b"x"))
    assert move_to_blob_store(api.store).forgotten == 1
    assert database_copies(api.store) == []


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def at_0032(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0032 (URL), before artifacts had a location; each store."""
    if request.param == "sqlite":
        database = Database(sqlite_url(tmp_path / "herder.db"))
        command.upgrade(alembic_config(database), "0032")
        database.dispose()
        yield database.url
        return
    with database_at_revision("artifact_migration", "0032") as database:
        yield database.url


def test_the_migration_keeps_older_uploads_readable_where_they_are(
    at_0032: str, tmp_path: Path
) -> None:
    old = Database(at_0032)
    try:
        with old.write() as connection:  # as the release before wrote an upload
            connection.execute(
                text(
                    "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
                    " VALUES (:tenant, 'before', 1, false, '{}', :made)"
                ),
                {"tenant": TENANT, "made": MADE},
            )
        keep_in_database(old, TENANT, OLD_PROGRAM)
    finally:
        old.dispose()
    store = Store(at_0032, keyring=TEST_KEYRING, artifact_blobs=DirectoryBlobStore(tmp_path / "b"))
    try:
        store.migrate()
        assert locations(store) == {(TENANT, OLD_SHA256): "database"}
        _, content = store.artifacts.read(TENANT, OLD_SHA256)
        assert b"".join(content) == OLD_PROGRAM
        with store.database.read() as connection:
            assert connection.execute(select(func.count()).select_from(blobs)).scalar() == 1
        assert move_to_blob_store(store).moved == 1
        _, content = store.artifacts.read(TENANT, OLD_SHA256)
        assert b"".join(content) == OLD_PROGRAM
        assert database_copies(store) == []
    finally:
        store.close()
