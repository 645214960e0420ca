"""The cold tier (PostgreSQL): a slice past the hot window is exported as a tenant's day
files and a manifest, then dropped; old-window listings read it back, merged with the hot
runs, within the caller's tenant and retention; a crash before the manifest is redone."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from herder.api.app import create_app
from herder.app import reports
from herder.app.claims import claim
from herder.app.runs import cancel_run
from herder.app.submit import submit
from herder.control.maintenance import Maintenance
from herder.domain.errors import NotFound
from herder.domain.history import slice_of
from herder.domain.jobs import JobSpec, Resources
from herder.domain.listings import PageRequest, RunQuery
from herder.domain.models import Run
from herder.domain.overrides import RunOverrides
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import AttemptState
from herder.protocol import Completion
from herder.settings import Settings
from herder.store.cold import export
from herder.store.cold.blobs import BlobStore, DirectoryBlobStore, put_bytes
from herder.store.cold.manifest import Manifest, manifest_key
from herder.store.cold.tier import ColdTier
from herder.store.history.partitions import HISTORY_TABLES, detach_slice, detached_slices
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.conftest import fresh_postgres_url
from tests.integration.dispatching import dispatch

pytestmark = pytest.mark.postgres

START = datetime(2027, 3, 8, 9, 0, tzinfo=UTC)  # a Monday: the slice's first day
OLD = slice_of(START)
HOT_DAYS = 90
PAST_HOT = timedelta(days=HOT_DAYS + 8)  # the whole slice is past the hot window


@dataclass
class World:
    store: Store
    clock: ManualClock
    cold_root: Path
    tenant_id: str
    admin_key: str
    maintenance: Maintenance
    worker_id: str | None = None

    def tenant(self, retention_days: int = 1825) -> str:
        tenant = self.store.access.create_tenant(f"t{random.random()}")
        self.store.access.update_tenant(tenant.id, retention_days=retention_days)
        return tenant.id

    def submit(self, tenant_id: str | None = None, job_id: str | None = None) -> str:
        owner = tenant_id or self.tenant_id
        if job_id is None:
            spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
            job_id = self.store.jobs.create(owner, f"j{random.random()}", spec).id
        run, _ = submit(self.store, owner, job_id, RunOverrides())
        return run.id

    def run_to_success(self, tenant_id: str | None = None) -> str:
        """A run with an attempt and its events, ended."""
        run_id = self.submit(tenant_id)
        worker_id = self.worker()
        dispatch(self.store)
        (assignment,) = claim(self.store, worker_id, 1)
        done = Completion(
            attempt_id=assignment.attempt_id, attempt=assignment.attempt,
            outcome=AttemptState.SUCCEEDED, exit_code=0, reason="exit 0",
        )  # fmt: skip
        reports.report(self.store, worker_id, [], [done])
        return run_id

    def worker(self) -> str:
        """The one worker (no reaper runs here: it stays alive as the clock jumps)."""
        if self.worker_id is None:
            token = self.store.access.create_worker_token("w")
            self.worker_id = self.store.workers.register(
                self.store.access.authenticate_worker_token(token), name="w",
                capacity=Resources(cpu=2, memory_mb=1024), max_slots=2, labels={}, version="t",
            )[0].id  # fmt: skip
        return self.worker_id

    def history_of_the_old_week(self, tenant_id: str | None = None) -> list[str]:
        """Runs on several days of the old slice: ended with attempts, and cancelled."""
        made = []
        for _ in range(3):
            made.append(self.run_to_success(tenant_id))
            cancelled = self.submit(tenant_id)
            cancel_run(self.store, tenant_id or self.tenant_id, cancelled)
            made.append(cancelled)
            self.clock.advance(timedelta(days=2).total_seconds())
        return made

    def listed(
        self, since: datetime, tenant_id: str | None = None, limit: int = 100, **more: Any
    ) -> list[Run]:
        found, cursor = [], None
        while True:
            page = self.store.runs.list(
                tenant_id or self.tenant_id,
                RunQuery(since=since, page=PageRequest(limit, cursor), **more),
            )
            found += page.items
            if (cursor := page.next_cursor) is None:
                return found

    def go_cold(self) -> None:
        """Past the hot window: a maintenance pass exports the old week, then drops it."""
        self.clock.advance(PAST_HOT.total_seconds())
        self.maintenance.step()

    @contextmanager
    def http(self, home: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
        """The API over this store, and the admin's headers."""
        settings = Settings(home=home, database_url=self.store.database.url)
        with TestClient(create_app(self.store, settings)) as client:
            yield client, {"Authorization": f"Bearer {self.admin_key}"}

    def manifest(self) -> Manifest | None:
        path = self.cold_root / manifest_key(OLD)
        return Manifest.from_json(path.read_bytes()) if path.exists() else None

    def detached(self) -> set[str]:
        with self.store.database.read() as connection:
            return {
                table.name for table in HISTORY_TABLES if OLD in detached_slices(connection, table)
            }


@pytest.fixture
def world(postgres_template: str, tmp_path: Path) -> Iterator[World]:
    """PostgreSQL's only: SQLite has no cold tier (its retention deletes runs)."""
    database_url = next(urls := fresh_postgres_url(postgres_template))
    clock = ManualClock(START)
    cold_root = tmp_path / "cold"
    cold = ColdTier(DirectoryBlobStore(cold_root), hot_days=HOT_DAYS)
    store = Store(database_url, clock=clock, rng=random.Random(7), cold=cold)
    maintenance = Maintenance(store.history, partitioned=True)
    maintenance.step()
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    yield World(store, clock, cold_root, bootstrap.tenant.id, bootstrap.admin_key, maintenance)
    store.close()
    urls.close()  # drops the database


def _slice_counts(world: World) -> dict[str, int]:
    with world.store.database.read() as connection:
        return {
            table: connection.execute(
                text(f"SELECT count(*) FROM {table}_{OLD.suffix}")
            ).scalar_one()
            for table in ("runs", "attempts", "run_events")
        }


def test_a_slice_past_the_hot_window_is_exported_then_dropped(world: World) -> None:
    made = world.history_of_the_old_week()
    before = world.listed(START)
    counts = _slice_counts(world)
    world.go_cold()

    manifest = world.manifest()
    assert manifest is not None
    assert manifest.runs == counts["runs"] == len(made)
    assert sum(file.attempts for file in manifest.files) == counts["attempts"] == 3
    assert sum(file.events for file in manifest.files) == counts["run_events"]
    assert {file.tenant_id for file in manifest.files} == {world.tenant_id}
    assert len({file.day for file in manifest.files}) == 3  # a file a day with runs
    for file in manifest.files:
        stored = (world.cold_root / file.key).read_bytes()
        assert hashlib.sha256(stored).hexdigest() == file.sha256
        assert len(stored) == file.bytes
        assert len(gzip.decompress(stored).splitlines()) == file.runs
        assert (world.cold_root / file.key).stat().st_mode & 0o777 == 0o600
        assert (world.cold_root / file.key).parent.stat().st_mode & 0o777 == 0o700
    assert world.cold_root.stat().st_mode & 0o777 == 0o700
    assert world.detached() == set()  # dropped from the database once exported
    with world.store.database.read() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar_one() == 0

    assert world.listed(START) == before  # the same runs, states and attempts
    assert world.store.runs.list(world.tenant_id).items == []  # no window: hot only


def test_a_window_spanning_hot_and_cold_merges_newest_first(world: World) -> None:
    cold_runs = world.history_of_the_old_week()
    world.clock.advance(PAST_HOT.total_seconds())
    hot_runs = [world.submit() for _ in range(3)]
    world.maintenance.step()
    assert world.manifest() is not None

    for limit in (1, 2, 5, 100):
        listed = [run.id for run in world.listed(START, limit=limit)]
        assert listed == sorted(cold_runs + hot_runs, reverse=True)
    succeeded = world.listed(START, states=["succeeded"])
    assert [run.attempt_count for run in succeeded] == [1, 1, 1]
    old_only = world.listed(START, until=START + timedelta(days=3))
    assert {run.id for run in old_only} == set(cold_runs[:4])


def test_a_schedules_cold_runs_are_listed_by_its_id(world: World) -> None:
    spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
    job_id = world.store.jobs.create(world.tenant_id, "nightly", spec).id
    schedule = ScheduleSpec(cron="0 3 * * *")
    schedule_id = world.store.schedules.create(
        world.tenant_id, job_id, schedule, world.clock.now() + timedelta(days=365)
    ).id
    run, _ = submit(world.store, world.tenant_id, job_id, RunOverrides(), as_schedule=schedule_id)
    cancel_run(world.store, world.tenant_id, run.id)  # ended: a live run stays hot
    world.history_of_the_old_week()  # other runs of the tenant, in the same slice
    world.go_cold()
    (listed,) = world.listed(START, schedule_id=schedule_id)
    assert (listed.id, listed.schedule_id) == (run.id, schedule_id)
    assert (
        world.store.runs.list(world.tenant_id, RunQuery(schedule_id=schedule_id)).items == []
    )  # cold


def test_another_tenants_cold_runs_never_appear(world: World) -> None:
    other = world.tenant()
    mine = world.history_of_the_old_week()
    world.clock.moment = START
    theirs = world.history_of_the_old_week(other)
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    assert {file.tenant_id for file in manifest.files} == {world.tenant_id, other}
    assert {run.id for run in world.listed(START)} == set(mine)
    assert {run.id for run in world.listed(START, tenant_id=other)} == set(theirs)


def test_a_crash_before_the_manifest_is_redone_without_duplicates(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = world.history_of_the_old_week()
    world.clock.advance(PAST_HOT.total_seconds())

    def crash_at_the_old_manifest(blobs: BlobStore, key: str, data: bytes) -> None:
        if key == manifest_key(OLD):
            raise OSError("the disk went away")
        put_bytes(blobs, key, data)

    monkeypatch.setattr(export, "put_bytes", crash_at_the_old_manifest)  # after the day files
    with pytest.raises(OSError, match="disk went away"):
        world.maintenance.step()
    assert world.manifest() is None
    assert list(world.cold_root.glob("runs/*/*/*.jsonl.gz"))  # written before the crash
    assert world.detached() == {table.name for table in HISTORY_TABLES}  # kept for the redo

    monkeypatch.undo()
    world.maintenance.step()
    manifest = world.manifest()
    assert manifest is not None
    assert manifest.runs == len(made)
    assert world.detached() == set()
    listed = [run.id for run in world.listed(START)]
    assert sorted(listed, reverse=True) == listed == sorted(made, reverse=True)


def test_cold_day_files_past_a_tenants_retention_are_removed(world: World) -> None:
    brief = world.tenant(retention_days=HOT_DAYS + 30)
    kept = world.history_of_the_old_week()
    world.clock.moment = START
    world.history_of_the_old_week(brief)
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    brief_files = [file.key for file in manifest.files if file.tenant_id == brief]
    assert brief_files

    world.clock.advance(timedelta(days=40).total_seconds())
    world.maintenance.step()
    assert world.listed(START - timedelta(days=1), tenant_id=brief) == []
    manifest = world.manifest()
    assert manifest is not None
    assert {file.tenant_id for file in manifest.files} == {world.tenant_id}
    assert not any((world.cold_root / key).exists() for key in brief_files)
    assert {run.id for run in world.listed(START)} == set(kept)


def test_the_export_writes_a_run_with_its_attempts_and_events(world: World) -> None:
    run_id = world.run_to_success()
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    (file,) = manifest.files
    (line,) = gzip.decompress((world.cold_root / file.key).read_bytes()).splitlines()
    record = json.loads(line)
    assert record["id"] == run_id
    assert record["tenant_id"] == world.tenant_id
    assert [attempt["state"] for attempt in record["attempts"]] == ["succeeded"]
    assert [event["to_state"] for event in record["events"]][-1] == "succeeded"


HOSTILE_WINDOWS = [
    {"since": "0001-01-01T00:00:00Z"},
    {"since": "0001-01-01T00:00:00Z", "until": "9999-12-31T23:59:59Z"},
    {"since": "2027-03-01T00:00:00Z", "until": "2020-01-01T00:00:00Z"},  # ends before start
    {"since": "2027-03-01T00:00:00+14:00", "until": "2027-03-01T00:00:00-12:00"},
    {"since": "2027-03-01T00:00:00Z", "limit": "1000", "state": "succeeded"},
]
REFUSED_WINDOWS = [
    ({"since": "2027-03-01T00:00:00"}, "since"),  # no zone
    ({"since": "2027-03-01T00:00:00Z", "cursor": "bm90IGFuIGlk"}, "cursor"),
    ({"since": "2027-03-01T00:00:00Z", "until": "10000-01-01T00:00:00Z"}, "until"),
    ({"since": "yesterday"}, "since"),
]


def test_odd_old_windows_answer_and_bad_ones_are_422(world: World, tmp_path: Path) -> None:
    world.history_of_the_old_week()
    world.go_cold()
    with world.http(tmp_path) as (http, headers):
        for params in HOSTILE_WINDOWS:
            response = http.get("/v1/runs", params=params, headers=headers)
            assert response.status_code == 200, (params, response.text)
        for params, field in REFUSED_WINDOWS:
            response = http.get("/v1/runs", params=params, headers=headers)
            assert response.status_code == 422, (params, response.text)
            assert field in response.text
        everything = http.get("/v1/runs", params=HOSTILE_WINDOWS[1], headers=headers).json()
        assert len(everything["items"]) == 6


def test_a_cold_runs_detail_is_read_from_its_day_file(world: World) -> None:
    other = world.tenant()
    run_id = world.run_to_success()
    before = world.store.runs.detail(world.tenant_id, run_id)
    world.go_cold()
    assert world.manifest() is not None
    assert world.store.runs.detail(world.tenant_id, run_id) == before
    assert world.store.runs.events(world.tenant_id, run_id) == before.events
    with pytest.raises(NotFound):
        world.store.runs.detail(other, run_id)


def test_odd_run_ids_are_404_never_500(world: World, tmp_path: Path) -> None:
    world.run_to_success()
    world.go_cold()
    odd = ["run_" + "Z" * 26, "run_" + "0" * 26, "run_0000000000!!!!!!!!!!!!!!!!", "run_", "x"]
    with world.http(tmp_path) as (http, headers):
        for run_id in odd:
            response = http.get(f"/v1/runs/{run_id}", headers=headers)
            assert response.status_code == 404, (run_id, response.text)


def test_a_slice_detached_from_runs_alone_waits_for_the_others(world: World) -> None:
    """A detach gives up on a busy table's lock: until runs, attempts and events are all
    detached, nothing is exported and nothing dropped."""
    made = world.history_of_the_old_week()
    world.clock.advance(PAST_HOT.total_seconds())
    (runs_table,) = [table for table in HISTORY_TABLES if table.name == "runs"]
    with world.store.database.write() as connection:
        detach_slice(connection, runs_table, OLD)
    assert world.store.history.export_detached() == []
    world.store.history.drop_detached()
    assert world.detached() == {"runs"}
    assert world.manifest() is None

    world.maintenance.step()
    manifest = world.manifest()
    assert manifest is not None
    assert manifest.runs == len(made)
    assert world.detached() == set()
