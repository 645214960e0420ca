"""History that lasts: time slices made ahead, a run's rows in its slice, retention by whole
slices on PostgreSQL and by batched deletes on SQLite, a tenant's shorter retention, and
unique keys that hold across a slice boundary."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, text

from herder.app import reports
from herder.app.claims import claim
from herder.app.submit import submit
from herder.clock import epoch_ms
from herder.control.maintenance import Maintenance
from herder.domain.errors import NotFound
from herder.domain.history import DEFAULT_RETENTION_DAYS, slice_of, slices_wanted
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.listings import PageRequest, RunQuery
from herder.domain.models import Assignment, Principal, Role
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState, RunState
from herder.protocol import Completion, OutputChunk
from herder.store.audit import AuditCall
from herder.store.dialect import insert_rows_ignoring_duplicates
from herder.store.history.partitions import SLICED_TABLES, attached_slices, detached_slices
from herder.store.schema import attempt_logs, audit_log, runs
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.dispatching import dispatch

# Mid-week, well inside a slice, some weeks after the template's slices.
START = datetime(2027, 3, 10, 12, 0, tzinfo=UTC)


@dataclass
class World:
    store: Store
    clock: ManualClock
    tenant_id: str
    maintenance: Maintenance

    def job(self, tenant_id: str | None = None) -> str:
        spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
        owner = tenant_id or self.tenant_id
        return self.store.jobs.create(owner, f"j{random.random()}", spec).id

    def submit(self, tenant_id: str | None = None) -> str:
        owner = tenant_id or self.tenant_id
        run, _ = submit(self.store, owner, self.job(owner), RunOverrides())
        return run.id

    def listed(self, tenant_id: str | None = None) -> set[str]:
        page = self.store.runs.list(tenant_id or self.tenant_id, RunQuery(page=PageRequest(1000)))
        return {run.id for run in page.items}

    def tenant(self, retention_days: int) -> str:
        tenant = self.store.access.create_tenant(f"t{random.random()}")
        self.store.access.update_tenant(tenant.id, retention_days=retention_days)
        return tenant.id

    def worker(self) -> str:
        store = self.store
        token = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
        return store.workers.register(
            token, name="w", capacity=Resources(cpu=2, memory_mb=1024),
            max_slots=2, labels={}, version="t",
        )[0].id  # fmt: skip

    def finish(self, worker_id: str, assignment: Assignment, output: bytes = b"") -> int:
        chunks = [OutputChunk.of(assignment.attempt_id, assignment.attempt, 0, "stdout", output)]
        done = Completion(
            attempt_id=assignment.attempt_id, attempt=assignment.attempt,
            outcome=AttemptState.SUCCEEDED, exit_code=0, reason="exit 0",
        )  # fmt: skip
        (result,) = reports.report(self.store, worker_id, chunks if output else [], [done])
        return result.status

    @property
    def postgres(self) -> bool:
        return self.store.database.is_postgres


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    clock = ManualClock(START)
    store = Store(database_url, clock=clock, rng=random.Random(7))
    maintenance = Maintenance(store.history, partitioned=store.database.is_postgres)
    maintenance.step()
    yield World(store, clock, store.access.create_tenant("t").id, maintenance)
    store.close()


SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def pg_world(world: World) -> World:
    if not world.postgres:
        pytest.skip("time slices are PostgreSQL's")
    return world


def partition_of(world: World, table: str, column: str, value: str) -> str:
    with world.store.database.read() as connection:
        found = connection.execute(
            text(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = :value"),
            {"value": value},
        ).scalars()
        return str(set(found).pop())


def test_the_maintenance_loop_makes_every_tables_slices_ahead(pg_world: World) -> None:
    with pg_world.store.database.read() as connection:
        for table in SLICED_TABLES:
            assert set(slices_wanted(START)) <= attached_slices(connection, table)
    pg_world.clock.advance(timedelta(days=30).total_seconds())
    pg_world.maintenance.step()
    with pg_world.store.database.read() as connection:
        for table in SLICED_TABLES:
            assert set(slices_wanted(pg_world.clock.now())) <= attached_slices(connection, table)


def test_a_runs_attempts_events_and_logs_land_in_its_slice(pg_world: World) -> None:
    world = pg_world
    run_id = world.submit()
    worker_id = world.worker()
    dispatch(world.store)
    (assignment,) = claim(world.store, worker_id, 1)
    assert world.finish(worker_id, assignment, b"hi\n") == 200
    suffix = slice_of(START).suffix
    assert partition_of(world, "runs", "id", run_id) == f"runs_{suffix}"
    assert partition_of(world, "attempts", "run_id", run_id) == f"attempts_{suffix}"
    assert partition_of(world, "run_events", "run_id", run_id) == f"run_events_{suffix}"
    logs = partition_of(world, "log_chunks", "attempt_id", assignment.attempt_id)
    assert logs == f"log_chunks_{suffix}"
    assert world.store.log_compaction.compact_ended().compacted == [assignment.attempt_id]
    compacted = partition_of(world, "attempt_logs", "attempt_id", assignment.attempt_id)
    assert compacted == f"attempt_logs_{suffix}"


def test_a_run_live_for_weeks_is_still_placed_and_settled(world: World) -> None:
    """The hot path reads live rows above the live floor: the oldest live run sets it, so
    a run queued (then running) for weeks, slices ago, is never out of its sight."""
    waiting = world.submit()
    world.clock.advance(timedelta(weeks=5).total_seconds())
    world.maintenance.step()
    worker_id = world.worker()
    dispatch(world.store)
    (assignment,) = claim(world.store, worker_id, 1)
    assert assignment.run_id == waiting
    world.clock.advance(timedelta(weeks=3).total_seconds())
    world.maintenance.step()
    assert world.finish(worker_id, assignment) == 200
    assert world.store.runs.get(world.tenant_id, waiting).state is RunState.SUCCEEDED


def test_retention_detaches_a_whole_slice_then_drops_it(pg_world: World) -> None:
    world, history = pg_world, pg_world.store.history
    old = world.submit()
    world.clock.advance(timedelta(days=DEFAULT_RETENTION_DAYS + 8).total_seconds())
    recent = world.submit()
    history.prepare_slices()
    detached = history.detach_expired()
    old_slice = slice_of(START)
    assert f"runs_{old_slice.suffix}" in detached
    assert world.listed() == {recent}
    with world.store.database.read() as connection:
        for table in SLICED_TABLES:
            assert old_slice not in attached_slices(connection, table)
            assert old_slice in detached_slices(connection, table)  # for an exporter to read
        assert connection.execute(select(func.count()).select_from(runs)).scalar() == 1
    history.drop_detached()
    with world.store.database.read() as connection:
        for table in SLICED_TABLES:
            assert not detached_slices(connection, table)
    with pytest.raises(NotFound):
        world.store.runs.get(world.tenant_id, old)


def test_a_shorter_tenant_retention_is_honoured_while_another_keeps_its_runs(
    world: World,
) -> None:
    brief = world.tenant(retention_days=7)
    brief_run, kept_run = world.submit(brief), world.submit()
    world.clock.advance(timedelta(days=8).total_seconds())
    world.maintenance.step()
    assert world.listed(brief) == set()
    with pytest.raises(NotFound):
        world.store.runs.get(brief, brief_run)
    with pytest.raises(NotFound):
        world.store.logs.read(brief, brief_run)
    assert world.listed() == {kept_run}
    assert world.store.runs.get(world.tenant_id, kept_run).id == kept_run
    if not world.postgres:  # deleted at once; PostgreSQL drops the slice when all have let go
        with world.store.database.read() as connection:
            assert connection.execute(select(runs.c.id)).scalars().all() == [kept_run]


def test_an_idempotency_key_holds_across_a_slice_boundary(world: World) -> None:
    boundary = slice_of(START).end
    job_id, submitted = world.job(), []
    for moment in (boundary - timedelta(milliseconds=1), boundary + timedelta(milliseconds=1)):
        world.clock.moment = moment
        submitted.append(
            submit(world.store, world.tenant_id, job_id, RunOverrides(), idempotency_key="k")
        )
    (first, created), (again, created_again) = submitted
    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert slice_of(world.clock.now()) != slice_of(first.created_at)
    assert world.listed() == {first.id}


def test_a_fire_happens_once_across_a_slice_boundary(world: World) -> None:
    """The same (schedule, nominal time) inserted again with an id a slice later, as a
    late or second firer would, is refused by the unique key."""
    boundary = slice_of(START).end
    world.clock.moment = boundary - timedelta(milliseconds=1)
    first = world.submit()
    nominal = boundary - timedelta(minutes=1)
    with world.store.database.read() as connection:
        row = dict(connection.execute(select(runs).where(runs.c.id == first)).one()._mapping)
    fired = {**row, "schedule_id": "sch_x", "scheduled_for": nominal}
    before = {**fired, "id": new_id("run", epoch_ms(boundary - timedelta(milliseconds=1)))}
    after = {**fired, "id": new_id("run", epoch_ms(boundary + timedelta(milliseconds=1)))}
    with world.store.database.write() as connection:
        assert insert_rows_ignoring_duplicates(connection, runs, [before], runs.c.id) == [
            before["id"]
        ]
    with world.store.database.write() as connection:
        assert insert_rows_ignoring_duplicates(connection, runs, [after], runs.c.id) == []
    with world.store.database.read() as connection:
        count = select(func.count()).where(runs.c.schedule_id == "sch_x")
        assert connection.execute(count).scalar() == 1


def test_two_firers_racing_for_one_fire_make_one_run(pg_world: World) -> None:
    """The second insert waits for the first's commit on the guard's key, then skips."""
    world, boundary = pg_world, slice_of(START).end
    first = world.submit()
    with world.store.database.read() as connection:
        row = dict(connection.execute(select(runs).where(runs.c.id == first)).one()._mapping)
    fire = {**row, "schedule_id": "sch_race", "scheduled_for": boundary}
    made: dict[str, list[str]] = {}

    def second() -> None:
        again = {**fire, "id": new_id("run", epoch_ms(boundary + timedelta(seconds=1)))}
        with world.store.database.write() as connection:
            made["second"] = insert_rows_ignoring_duplicates(connection, runs, [again], runs.c.id)

    with world.store.database.write() as connection:
        early = {**fire, "id": new_id("run", epoch_ms(boundary - timedelta(seconds=1)))}
        made["first"] = insert_rows_ignoring_duplicates(connection, runs, [early], runs.c.id)
        racer = threading.Thread(target=second)
        racer.start()
        racer.join(timeout=0.5)
        assert racer.is_alive()  # waiting on the first's uncommitted key
    racer.join(timeout=10)
    assert made == {"first": [early["id"]], "second": []}


@SQLITE_ONLY  # PostgreSQL drops whole slices
def test_sqlite_retention_deletes_a_runs_compacted_logs_with_it(world: World) -> None:
    brief = world.tenant(retention_days=1)
    run_id = world.submit(brief)
    worker_id = world.worker()
    dispatch(world.store)
    (assignment,) = claim(world.store, worker_id, 1)
    assert world.finish(worker_id, assignment, b"gone with its run\n") == 200
    assert world.store.log_compaction.compact_ended().compacted == [assignment.attempt_id]
    world.clock.advance(timedelta(days=2).total_seconds())
    world.maintenance.step()
    with world.store.database.read() as connection:
        assert connection.execute(select(runs.c.id)).scalars().all() == []
        assert connection.execute(select(func.count()).select_from(attempt_logs)).scalar() == 0
    with pytest.raises(NotFound):
        world.store.logs.read(brief, run_id)


@SQLITE_ONLY  # PostgreSQL drops whole slices
def test_sqlite_retention_deletes_in_batches(world: World) -> None:
    brief = world.tenant(retention_days=1)
    made = {world.submit(brief) for _ in range(5)}
    kept = world.submit()
    world.clock.advance(timedelta(days=2).total_seconds())
    assert [world.store.history.delete_expired_batch(2) for _ in range(4)] == [2, 2, 1, 0]
    assert world.listed() == {kept}
    assert made.isdisjoint(world.listed(brief))


def test_audit_entries_go_with_their_tenants_retention(world: World) -> None:
    brief = world.tenant(retention_days=7)

    def record(tenant_id: str) -> None:
        caller = Principal(tenant_id=tenant_id, role=Role.ADMIN, key_id="key_x", is_system=False)
        world.store.audit.record(
            AuditCall(tenant_id, caller, "jobs.create", "POST", "/v1/jobs", "job", None, [], 201)
        )

    record(brief)
    record(world.tenant_id)
    world.clock.advance(timedelta(days=8).total_seconds())
    record(brief)
    world.maintenance.step()
    with world.store.database.read() as connection:
        left = connection.execute(select(audit_log.c.tenant_id)).scalars().all()
    assert sorted(left) == sorted([brief, world.tenant_id])  # the brief tenant's new one
