"""Logs go cold with their runs: a slice past the hot window takes its attempts' compacted
logs (and any chunks left) into a log file a day and tenant, listed in its manifest; a cold
run's log reads the same as it did hot, within its tenant; a missing or damaged file is a
503 problem; retention removes the files; a crash before the manifest is redone."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from herder.app import reports
from herder.app.claims import claim
from herder.app.runs import cancel_run
from herder.app.submit import submit
from herder.domain.jobs import JobSpec
from herder.domain.models import Role
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState
from herder.protocol import Completion, OutputChunk
from herder.store.cold import export
from herder.store.cold.blobs import BlobStore, put_bytes
from herder.store.cold.manifest import manifest_key
from herder.store.schema import attempt_logs, log_chunks
from tests.integration import test_cold_tier
from tests.integration.dispatching import dispatch
from tests.integration.test_cold_tier import OLD, PAST_HOT, World

pytestmark = pytest.mark.postgres
world = test_cold_tier.world  # the same fixture: a PostgreSQL store, a cold tier, a clock

OUTPUT = [  # stdout and stderr interleaved, the worker's own line, bytes that are not UTF-8
    ("stdout", b"starting\n"),
    ("stderr", b"warning: disk 91% full\n"),
    ("stdout", "héllo wörld\n".encode() * 3),
    ("system", b"[herder] note\n"),
    ("stderr", b"\xff\xfe odd bytes\n"),
]


def run_with_output(
    world: World,
    tenant_id: str | None = None,
    replicas: int = 1,
    compact: bool = True,
    claimed_at: datetime | None = None,
) -> str:
    """A run whose members each wrote ``OUTPUT`` (their rank in each line) and succeeded;
    its logs compacted unless told not to. Claimed now, or at ``claimed_at``."""
    owner = tenant_id or world.tenant_id
    spec = JobSpec.model_validate({"runtime": "shell", "command": "true", "replicas": replicas,
                                   "resources": {"cpu": 1}})  # fmt: skip
    job_id = world.store.jobs.create(owner, f"j{random.random()}", spec).id
    run, _ = submit(world.store, owner, job_id, RunOverrides())
    worker_id = world.worker()
    if claimed_at is not None:
        world.clock.moment = claimed_at
    dispatch(world.store)
    assignments = claim(world.store, worker_id, replicas)
    assert len(assignments) == replicas
    for assignment in assignments:
        chunks = [
            OutputChunk.of(assignment.attempt_id, assignment.attempt, seq, stream,
                           b"rank %d: " % assignment.rank + data)
            for seq, (stream, data) in enumerate(OUTPUT)
        ]  # fmt: skip
        reports.report(world.store, worker_id, chunks, [])
    reports.report(world.store, worker_id, [], [
        Completion(attempt_id=a.attempt_id, attempt=a.attempt, outcome=AttemptState.SUCCEEDED,
                   exit_code=0, reason="exit 0")
        for a in assignments
    ])  # fmt: skip
    if compact:
        world.store.log_compaction.compact_ended()
    return run.id


def read_all(world: World, run_id: str, tenant_id: str | None = None, **asked: Any) -> Any:
    return world.store.logs.read(tenant_id or world.tenant_id, run_id, **asked)


def every_page(world: World, run_id: str, rank: int = 0) -> list[Any]:
    """The log read two chunks at a time, as a follower pages it."""
    pages, after = [], -1
    while True:
        page = read_all(world, run_id, rank=rank, after=after, limit=2)
        pages.append(page)
        if not page.chunks:
            return pages
        after = page.next_after


def log_rows(world: World) -> int:
    with world.store.database.read() as connection:
        return sum(
            int(connection.execute(select(func.count()).select_from(table)).scalar_one())
            for table in (attempt_logs, log_chunks)
        )


def test_a_runs_logs_read_the_same_after_its_slice_went_cold(world: World, tmp_path: Path) -> None:
    gang = run_with_output(world, replicas=2)
    single = run_with_output(world)
    before = {rank: read_all(world, gang, rank=rank) for rank in (0, 1)}
    pages_before = every_page(world, gang, rank=1)
    with world.http(tmp_path) as (http, headers):
        http_before = http.get(f"/v1/runs/{single}/logs", headers=headers).json()

    world.go_cold()

    manifest = world.manifest()
    assert manifest is not None
    (log_file,) = manifest.logs
    assert (log_file.attempts, log_file.tenant_id) == (3, world.tenant_id)
    assert log_rows(world) == 0  # gone from PostgreSQL with their slice
    assert {rank: read_all(world, gang, rank=rank) for rank in (0, 1)} == before
    assert [(c.stream, c.text) for c in before[1].chunks] == [
        (stream, "rank 1: " + data.decode(errors="replace")) for stream, data in OUTPUT
    ]
    assert every_page(world, gang, rank=1) == pages_before
    with world.http(tmp_path) as (http, headers):
        assert http.get(f"/v1/runs/{single}/logs", headers=headers).json() == http_before
        for params in ({"attempt": 2}, {"rank": 5}, {"rank": 1}):
            response = http.get(f"/v1/runs/{single}/logs", headers=headers, params=params)
            assert response.status_code == 404, (params, response.text)


def test_chunks_not_compacted_yet_go_cold_folded_into_their_blob(world: World) -> None:
    run_id = run_with_output(world, compact=False)
    before = read_all(world, run_id)
    world.go_cold()
    assert log_rows(world) == 0
    assert read_all(world, run_id) == before
    assert len(before.chunks) == len(OUTPUT)


def test_a_run_without_output_or_attempts_reads_an_empty_cold_log(world: World) -> None:
    cancelled = world.submit()
    cancel_run(world.store, world.tenant_id, cancelled)
    silent = world.run_to_success()
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    assert manifest.logs == ()
    for run_id in (cancelled, silent):
        page = read_all(world, run_id)
        assert (page.chunks, page.active) == ([], False)


def test_another_tenant_cannot_read_a_cold_log(world: World, tmp_path: Path) -> None:
    other = world.tenant()
    run_id = run_with_output(world)
    world.go_cold()
    with world.http(tmp_path) as (http, headers):
        assert http.get(f"/v1/runs/{run_id}/logs", headers=headers).status_code == 200
        _, token = world.store.access.create_api_key(other, Role.ADMIN, "k")
        theirs = {"Authorization": f"Bearer {token}"}
        response = http.get(f"/v1/runs/{run_id}/logs", headers=theirs)
        assert response.status_code == 404, response.text


@pytest.mark.parametrize("harm", ["missing", "damaged"])
def test_a_missing_or_damaged_cold_log_file_is_a_503_problem(
    world: World, tmp_path: Path, harm: str
) -> None:
    run_id = run_with_output(world)
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    path = world.cold_root / manifest.logs[0].key
    if harm == "missing":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[-5] ^= 0xFF
        path.write_bytes(bytes(data))
    with world.http(tmp_path) as (http, headers):
        response = http.get(f"/v1/runs/{run_id}/logs", headers=headers)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert f"the stored output of run {run_id}, attempt 1, rank 0" in response.json()["detail"]


def test_retention_removes_cold_log_files(world: World) -> None:
    brief = world.tenant(retention_days=PAST_HOT.days + 30)
    kept = run_with_output(world)
    gone = run_with_output(world, tenant_id=brief)
    world.go_cold()
    manifest = world.manifest()
    assert manifest is not None
    brief_logs = [file.key for file in manifest.logs if file.tenant_id == brief]
    assert brief_logs
    assert (world.cold_root / brief_logs[0]).exists()

    world.clock.advance(timedelta(days=40).total_seconds())
    world.maintenance.step()
    manifest = world.manifest()
    assert manifest is not None
    assert {file.tenant_id for file in manifest.logs} == {world.tenant_id}
    assert not (world.cold_root / brief_logs[0]).exists()
    assert len(read_all(world, kept).chunks) == len(OUTPUT)
    with pytest.raises(Exception, match="not found"):
        read_all(world, gone, tenant_id=brief)


def test_a_crash_before_the_manifest_is_redone_without_duplicates(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = run_with_output(world, replicas=2)
    before = [read_all(world, run_id, rank=rank) for rank in (0, 1)]
    world.clock.advance(PAST_HOT.total_seconds())

    def crash_at_the_old_manifest(blobs: BlobStore, key: str, data: bytes) -> None:
        if key == manifest_key(OLD):
            raise OSError("the disk went away")
        put_bytes(blobs, key, data)

    monkeypatch.setattr(export, "put_bytes", crash_at_the_old_manifest)
    with pytest.raises(OSError, match="disk went away"):
        world.maintenance.step()
    assert list(world.cold_root.glob("runs/*/*/*.logs"))  # written before the crash
    assert {"attempt_logs", "runs"} <= world.detached()  # the logs kept for the redo

    monkeypatch.undo()
    world.maintenance.step()
    manifest = world.manifest()
    assert manifest is not None
    assert [file.attempts for file in manifest.logs] == [2]
    assert world.detached() == set()
    assert [read_all(world, run_id, rank=rank) for rank in (0, 1)] == before


def test_an_attempt_made_in_the_next_week_goes_cold_with_its_run(world: World) -> None:
    """The run is made on its slice's last day and its attempt in the next slice, still
    hot when the run's goes cold: the log is read from there, and stays readable once that
    slice goes too."""
    world.clock.moment = OLD.end - timedelta(minutes=5)
    run_id = run_with_output(world, claimed_at=OLD.end + timedelta(minutes=5))
    with world.store.database.read() as connection:
        (attempt_id,) = connection.execute(text("SELECT id FROM attempts")).scalars()
    assert attempt_id >= OLD.bounds("att")[1]  # in the next slice
    before = read_all(world, run_id)

    world.clock.moment = OLD.end + timedelta(days=PAST_HOT.days - 8, hours=1)
    world.maintenance.step()
    manifest = world.manifest()
    assert manifest is not None
    assert [file.attempts for file in manifest.logs] == [1]
    assert log_rows(world) == 1  # its slice is still hot
    assert read_all(world, run_id) == before

    world.clock.advance(timedelta(days=8).total_seconds())
    world.maintenance.step()
    assert log_rows(world) == 0
    assert read_all(world, run_id) == before


def test_odd_asks_of_a_cold_log_are_404_or_422_never_500(world: World, tmp_path: Path) -> None:
    run_id = run_with_output(world)
    world.go_cold()
    odd_runs = ["run_" + "Z" * 26, "run_" + "0" * 26, run_id[:-1] + "!", run_id.lower(), "x"]
    odd_params: list[dict[str, Any]] = [
        {"attempt": 0}, {"attempt": -1}, {"attempt": 2**40}, {"rank": -1}, {"rank": 10**6},
        {"after": -5}, {"after": 2**62}, {"limit": 0}, {"limit": 10**9}, {"after": "x"},
    ]  # fmt: skip
    with world.http(tmp_path) as (http, headers):
        for odd in odd_runs:
            response = http.get(f"/v1/runs/{odd}/logs", headers=headers)
            assert response.status_code == 404, (odd, response.text)
        for params in odd_params:
            response = http.get(f"/v1/runs/{run_id}/logs", headers=headers, params=params)
            assert response.status_code in (200, 404, 422), (params, response.text)
        page = http.get(f"/v1/runs/{run_id}/logs", headers=headers, params={"after": 2})
        assert [chunk["seq"] for chunk in page.json()["chunks"]] == [3, 4]
