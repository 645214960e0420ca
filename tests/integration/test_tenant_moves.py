"""A cell's part in a tenant's move (docs/cells.md, "Moving a tenant"), on each store: a
frozen tenant's writes are refused with 503 naming the cell, never 500, its reads go on; the
freeze is ordered with the firer's fence, so every instant before the exported
``next_fire_at`` fired here and none after; the import, on another store with its own secrets
key, makes the same tenant once (twice is one), refuses a tenant that lives there and a
document naming another tenant's ids."""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from herder.api.app import create_app
from herder.app import moves
from herder.app.firing import fire_due
from herder.domain.errors import Conflict, Invalid, TenantMoving
from herder.domain.jobs import JobSpec
from herder.domain.models import Role
from herder.domain.moves import MoveState, TenantExport
from herder.keyring import Keyring
from herder.settings import Settings
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.moves.guard import acting_for
from herder.store.moves.states import MoveStatus
from herder.store.schedules import partition_of
from herder.store.schema import jobs, schedules
from herder.store.store import Store
from tests.conftest import TEST_KEYRING, fresh_sqlite_url
from tests.integration.conftest import Api
from tests.integration.test_firing_batches import read_batch
from tests.integration.test_hooks import SECRET, herder_headers
from tests.integration.test_schedules import Firing, firing  # noqa: F401

JOB = {"name": "j", "runtime": "shell", "command": "true"}


@pytest.fixture
def other_cell(sqlite_template: Path, tmp_path: Path) -> Iterator[Store]:
    """Another cell's store: SQLite, a secrets key and a blob store of its own."""
    (tmp_path / "other").mkdir()
    store = Store(
        fresh_sqlite_url(sqlite_template, tmp_path / "other"),
        keyring=Keyring.of([b"k" * 32]),
        artifact_blobs=DirectoryBlobStore(tmp_path / "other" / "blobs"),
    )
    yield store
    store.close()


def _tenant(api: Api, name: str = "alpha") -> tuple[str, dict[str, str]]:
    tenant = api.store.access.create_tenant(name)
    return tenant.id, api.as_key(api.store.access.create_api_key(tenant.id, Role.ADMIN, "k")[1])


def _made(answer: Any) -> dict[str, Any]:
    assert answer.status_code in (200, 201), answer.text
    made: dict[str, Any] = answer.json()
    return made


def test_a_frozen_tenants_writes_are_refused_naming_the_cell_and_its_reads_go_on(
    api: Api,
) -> None:
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    schedule = _made(
        api.http.post("/v1/schedules", headers=auth, json={"job_id": job["id"], "cron": "@daily"})
    )
    hook = _made(api.http.post("/v1/hooks", headers=auth, json={"name": "h", "secret": SECRET}))
    frozen = api.http.put(
        f"/v1/tenants/{tenant_id}/move", headers=api.admin, json={"state": "frozen", "cell": "b"}
    )
    assert frozen.json() == {"tenant_id": tenant_id, "state": "frozen", "cell": "b"}
    writes: list[tuple[str, str, object]] = [
        ("POST", f"/v1/jobs/{job['id']}/runs", {}),
        ("POST", "/v1/jobs", {"name": "k", "runtime": "shell", "command": "true"}),
        ("POST", f"/v1/schedules/{schedule['id']}/trigger", None),
        ("POST", "/v1/events", {"name": "push"}),
        ("PUT", "/v1/secrets/S", {"value": "v"}),
        ("DELETE", f"/v1/jobs/{job['id']}", None),
        ("POST", "/v1/workflows", {"name": "w", "tasks": [{"name": "t", "job": "j"}]}),
    ]
    for method, path, body in writes:
        answer = api.http.request(method, path, headers=auth, json=body)
        assert answer.status_code == 503, (method, path, answer.text)
        assert answer.json()["cell"] == "b"
        assert f"tenant {tenant_id} is moving to cell b" in answer.json()["detail"]
        assert answer.headers["Retry-After"] == "2"
    payload = b'{"ref": "main"}'
    delivered = api.http.post(
        f"/v1/hooks/{hook['id']}", content=payload, headers=herder_headers(payload, "f-1")
    )
    assert delivered.status_code == 503, delivered.text
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=auth).status_code == 200
    # another tenant goes on
    _, other = _tenant(api, "beta")
    assert api.http.post("/v1/jobs", headers=other, json=JOB).is_success
    # unfrozen: its writes go on
    back = api.http.put(f"/v1/tenants/{tenant_id}/move", headers=api.admin, json={"state": None})
    assert back.json()["state"] is None
    assert api.http.post(f"/v1/jobs/{job['id']}/runs", headers=auth, json={}).status_code == 201


def test_a_tenant_with_a_backfill_under_way_is_not_frozen_until_it_ends(api: Api) -> None:
    """A backfill's instants are told apart by the runs this cell keeps (the schedule's
    unique key), so it does not travel: the freeze is refused naming it, and a frozen
    tenant starts none (a write like any other)."""
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    schedule = _made(
        api.http.post("/v1/schedules", headers=auth, json={"job_id": job["id"], "cron": "@hourly"})
    )
    backfill = _made(
        api.http.post(
            f"/v1/schedules/{schedule['id']}/backfills",
            headers=auth,
            json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
        )
    )
    assert backfill["state"] == "running"
    move = f"/v1/tenants/{tenant_id}/move"
    freeze = {"state": "frozen", "cell": "b", "pools": []}
    refused = api.http.put(move, headers=api.admin, json=freeze)
    assert refused.status_code == 409, refused.text
    assert backfill["id"] in refused.json()["detail"]
    assert "wait for them to finish or cancel them" in refused.json()["detail"]
    assert api.store.moves.status(tenant_id).state is None  # nothing changed
    cancelled = api.http.post(f"/v1/backfills/{backfill['id']}/cancel", headers=auth)
    assert cancelled.json()["state"] == "cancelled"
    assert _made(api.http.put(move, headers=api.admin, json=freeze))["state"] == "frozen"
    again = api.http.post(
        f"/v1/schedules/{schedule['id']}/backfills",
        headers=auth,
        json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
    )
    assert again.status_code == 503, again.text


def test_a_key_another_process_admitted_before_the_freeze_writes_nothing_after_it(
    api: Api, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another API process keeps the key admitted for 5 s, and the freeze cannot clear its
    cache: the write is refused by the tenant's row in its own transaction."""
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    other = Store(api.store.database.url, keyring=TEST_KEYRING)
    settings = Settings(home=tmp_path, database_url=api.store.database.url)
    try:
        with TestClient(create_app(other, settings)) as beside:
            assert beside.get("/v1/jobs", headers=auth).status_code == 200  # admitted, kept
            moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
            for method, path, body in [
                ("POST", "/v1/jobs", {**JOB, "name": "late"}),
                ("POST", f"/v1/jobs/{job['id']}/runs", {}),
                ("PUT", "/v1/secrets/S", {"value": "v"}),
            ]:
                answer = beside.request(method, path, headers=auth, json=body)
                assert answer.status_code == 503, (path, answer.text)
                assert f"tenant {tenant_id} is moving to cell b" in answer.json()["detail"]
            assert beside.get("/v1/jobs", headers=auth).status_code == 200  # reads go on
    finally:
        other.close()
    assert [row["name"] for row in api.store.moves.export(tenant_id).rows("jobs")] == ["j"]
    assert "could not record" not in caplog.text  # the refusals audited (its log stays here)


def test_a_write_racing_the_freeze_is_in_the_export_or_refused(api: Api) -> None:
    """Writers of the tenant's, admitted before the freeze, go on writing through it: each
    write either committed before the freeze (and is exported) or was refused."""
    tenant_id, _ = _tenant(api)
    spec = JobSpec(runtime="shell", command="true")
    made: list[str] = []
    refused: list[BaseException] = []
    started, enough = threading.Barrier(3), threading.Event()

    def writer(number: int) -> None:
        acting_for(tenant_id, "POST", "/v1/jobs")  # as the key check sets it for a request
        started.wait()
        for attempt in itertools.count():
            try:
                made.append(api.store.jobs.create(tenant_id, f"w{number}-{attempt}", spec).name)
                if len(made) >= 5:
                    enough.set()
            except TenantMoving as error:
                refused.append(error)
                return

    writers = [
        threading.Thread(target=contextvars.copy_context().run, args=(writer, number), daemon=True)
        for number in range(2)
    ]
    for thread in writers:
        thread.start()
    started.wait()
    assert enough.wait(30)
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    for thread in writers:
        thread.join(timeout=30)
    assert len(refused) == 2  # each writer's next write after the freeze
    exported = {row["name"] for row in api.store.moves.export(tenant_id).rows("jobs")}
    assert exported == set(made)


def test_a_write_holding_the_tenant_is_waited_for_by_the_freeze(api: Api) -> None:
    """A write under way when the freeze comes commits first, and the export reads it."""
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    frozen = threading.Event()

    def freeze() -> None:
        moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
        frozen.set()

    def held_write() -> None:
        acting_for(tenant_id, "PATCH", f"/v1/jobs/{job['id']}")
        with api.store.database.write() as connection:  # the tenant's row held first
            freezing = threading.Thread(target=freeze)
            freezing.start()
            assert not frozen.wait(0.5)  # the freeze waits for this write
            connection.execute(update(jobs).where(jobs.c.id == job["id"]).values(name="late"))
        freezing.join(timeout=30)
        assert frozen.is_set()

    contextvars.copy_context().run(held_write)
    assert [row["name"] for row in api.store.moves.export(tenant_id).rows("jobs")] == ["late"]


def test_shifts_the_move_does_not_take_are_refused(api: Api) -> None:
    tenant_id, _ = _tenant(api)
    path = f"/v1/tenants/{tenant_id}/move"
    for body in [{"state": "moved", "cell": "b"}, {"state": "arriving", "cell": "b"}]:
        assert api.http.put(path, headers=api.admin, json=body).status_code == 409
    system = api.http.put(
        f"/v1/tenants/{api.tenant_id}/move", headers=api.admin, json={"state": "frozen"}
    )
    assert system.status_code == 409
    assert api.http.get(f"/v1/tenants/{tenant_id}/export", headers=api.admin).status_code == 409
    unknown = api.http.put(
        "/v1/tenants/ten_0000/move", headers=api.admin, json={"state": "frozen", "cell": "b"}
    )
    assert unknown.status_code == 404
    assert api.store.moves.status(tenant_id).state is None


def test_the_freeze_is_ordered_with_the_firers_fence(firing: Firing) -> None:  # noqa: F811
    """A batch read before the freeze fires nothing after it; every instant before the
    exported next fire fired, none at or after it."""
    schedule_id = firing.schedule("* * * * *")
    firing.clock.advance(180)
    firing.fire(schedule_id)
    fired = firing.runs(schedule_id)
    assert len(fired) >= 1
    firing.clock.advance(60)
    stale = read_batch(firing)  # a firer read it due …
    assert stale
    moves.shift(firing.store, firing.tenant_id, MoveState.FROZEN, "b")  # … then it froze
    assert fire_due(firing.store, stale, actor="scheduler:late") == 0
    firing.clock.advance(120)
    firing.fire(schedule_id)
    assert firing.runs(schedule_id) == fired  # no fire while frozen
    [exported] = firing.store.moves.export(firing.tenant_id).rows("schedules")
    next_fire_at = firing.store.schedules.get(firing.tenant_id, schedule_id).next_fire_at
    assert next_fire_at is not None
    assert exported["next_fire_at"] == next_fire_at.isoformat()
    assert all(moment < next_fire_at for moment in fired)


def test_a_tenant_away_has_no_schedule_due_and_is_due_again_when_home(
    firing: Firing,  # noqa: F811
) -> None:
    """The firers read what is due by the index alone (no join to tenants, which made the
    partition's next due a scan of every schedule): a freeze clears its schedules' due
    instants, a move taken back restores them, jitter included (all of them in one
    statement on PostgreSQL)."""
    schedule_id = firing.schedule("* * * * *")
    partition = partition_of(schedule_id)
    due = firing.store.schedules.next_due(partition)
    assert due is not None
    others = [firing.schedule("*/5 * * * *", jitter_seconds=50) for _ in range(3)]
    dues = {one: _due_at(firing.store, one) for one in others}
    assert len(set(dues.values())) > 1  # jittered apart
    moves.shift(firing.store, firing.tenant_id, MoveState.FROZEN, "b")
    assert _due_at(firing.store, schedule_id) is None  # the index alone keeps it out
    assert firing.store.schedules.next_due(partition) is None
    firing.clock.advance(120)
    assert firing.store.schedules.due(partition, firing.clock.now(), 100) == []
    moves.shift(firing.store, firing.tenant_id, None, None)  # the move taken back
    assert _due_at(firing.store, schedule_id) == due
    assert firing.store.schedules.next_due(partition) == due
    assert {one: _due_at(firing.store, one) for one in others} == dues


def _due_at(store: Store, schedule_id: str) -> datetime | None:
    with store.database.read() as connection:
        moment: datetime | None = connection.execute(
            select(schedules.c.next_due_at).where(schedules.c.id == schedule_id)
        ).scalar_one()
    return moment


def test_an_export_imports_once_with_the_same_ids_and_secrets_sealed_anew(
    api: Api, other_cell: Store
) -> None:
    tenant_id, auth = _tenant(api)
    _made(api.http.put("/v1/secrets/TOKEN", headers=auth, json={"value": "s3cr3t"}))
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    schedule = _made(
        api.http.post("/v1/schedules", headers=auth, json={"job_id": job["id"], "cron": "@daily"})
    )
    channel = _made(api.http.post("/v1/alert-channels", headers=auth,
                                  json={"name": "c", "url": "https://example.com/h"}))  # fmt: skip
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    document = TenantExport.model_validate(
        {**api.http.get(f"/v1/tenants/{tenant_id}/export", headers=api.admin).json(),
         "from_cell": "a"}
    )  # fmt: skip
    assert "key_id" not in document.rows("secrets")[0]  # opened, for the target's key
    moves.import_tenant(other_cell, document)
    moves.import_tenant(other_cell, document)  # twice: one tenant
    with pytest.raises(Conflict, match="arriving here from cell a"):  # another move's
        moves.import_tenant(other_cell, document.model_copy(update={"from_cell": "c"}))
    assert other_cell.moves.status(tenant_id).state is MoveState.ARRIVING
    token = auth["Authorization"].removeprefix("Bearer ")
    assert other_cell.access.authenticate(token).tenant_id == tenant_id  # the same key
    assert other_cell.jobs.get(tenant_id, job["id"]).name == "j"
    assert other_cell.schedules.get(tenant_id, schedule["id"]).spec.cron == "@daily"
    assert other_cell.alert_channels.get(tenant_id, channel["id"]).name == "c"
    with other_cell.database.read() as connection:
        opened = other_cell.secrets.reveal(connection, tenant_id, {"T": "TOKEN"})
    assert opened == {"T": "s3cr3t"}
    moves.shift(other_cell, tenant_id, None, None)
    assert other_cell.moves.status(tenant_id).state is None
    # now it lives there: another import of it is refused
    with pytest.raises(Conflict, match="already lives"):
        moves.import_tenant(other_cell, document)
    with pytest.raises(Conflict):
        other_cell.moves.remove_import(tenant_id)


def test_a_return_taken_back_leaves_the_tenant_moved_with_its_history(
    api: Api, other_cell: Store
) -> None:
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    run = _made(api.http.post(f"/v1/jobs/{job['id']}/runs", headers=auth, json={}))
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    moves.import_tenant(
        other_cell, api.store.moves.export(tenant_id).model_copy(update={"from_cell": "a"})
    )
    moves.shift(api.store, tenant_id, MoveState.MOVED, "b")
    moves.shift(other_cell, tenant_id, None, None)
    # back from b: returning here, then taken back (a later step failed)
    moves.shift(other_cell, tenant_id, MoveState.FROZEN, "a")
    document = other_cell.moves.export(tenant_id).model_copy(update={"from_cell": "b"})
    assert moves.import_tenant(api.store, document).state is MoveState.RETURNING
    assert moves.import_tenant(api.store, document).state is MoveState.RETURNING  # again
    api.store.moves.remove_import(tenant_id)
    assert api.store.moves.status(tenant_id) == MoveStatus(tenant_id, MoveState.MOVED, "b")
    assert api.store.runs.get(tenant_id, run["id"]).job_id == job["id"]  # its history kept
    api.store.moves.remove_import(tenant_id)  # taken back already: nothing to do


def test_an_import_naming_another_tenants_ids_or_rows_is_refused(
    api: Api, other_cell: Store
) -> None:
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    document = api.store.moves.export(tenant_id).model_dump(mode="json")
    # the target has a tenant owning that job id already
    victim = other_cell.access.create_tenant("victim")
    spec = JobSpec(runtime="shell", command="true")
    victims_job = other_cell.jobs.create(victim.id, "v", spec)
    clash = {**document, "tables": {**document["tables"], "jobs": [
        {**document["tables"]["jobs"][0], "id": victims_job.id}]}}  # fmt: skip
    with pytest.raises(Conflict):
        moves.import_tenant(other_cell, TenantExport.model_validate(clash))
    assert other_cell.jobs.get(victim.id, victims_job.id).name == "v"
    # rows that say they are another tenant's, a tenant that lives there, the system tenant
    foreign = {**document, "tables": {**document["tables"], "jobs": [
        {**document["tables"]["jobs"][0], "tenant_id": victim.id}]}}  # fmt: skip
    with pytest.raises(Invalid):
        moves.import_tenant(other_cell, TenantExport.model_validate(foreign))
    existing = {**document, "tenant_id": victim.id, "tables": {
        "tenants": [{**document["tables"]["tenants"][0], "id": victim.id}]}}  # fmt: skip
    with pytest.raises(Conflict):
        moves.import_tenant(other_cell, TenantExport.model_validate(existing))
    system = {**document, "tables": {
        "tenants": [{**document["tables"]["tenants"][0], "is_system": True}]}}  # fmt: skip
    with pytest.raises(Invalid):
        moves.import_tenant(other_cell, TenantExport.model_validate(system))
    unknown_table = {**document, "tables": {**document["tables"], "runs": []}}
    with pytest.raises(Invalid):
        moves.import_tenant(other_cell, TenantExport.model_validate(unknown_table))
    # nothing of the tenant was made
    with pytest.raises(Exception, match="not found"):
        other_cell.access.get_tenant(tenant_id)
    assert job["id"]
