"""Compaction of ended attempts' output into one blob each: the logs read the same before and
after, byte for byte, while it happens, with chunks arriving late, for every gang member, at
the size cap; a damaged blob is a clear error; the loop runs under its lease."""

from __future__ import annotations

import hashlib
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, event, func, select, update

from herder.control.scheduler import Scheduler
from herder.protocol import OutputChunk
from herder.store.log_blobs import HEADER
from herder.store.logs import append_output
from herder.store.schema import attempt_logs, log_chunks
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, log, report

OUTPUT = [  # stdout and stderr interleaved, and the worker's own line
    ("stdout", "starting\n"),
    ("stderr", "warning: disk 91% full\n"),
    ("stdout", "héllo wörld\n" * 3),
    ("system", "[herder] note\n"),
    ("stderr", "done with 0 errors\n"),
]


def logs(api: Api, run_id: str, **params: Any) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}/logs", headers=api.admin, params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def chunk_rows(api: Api) -> int:
    with api.store.database.read() as connection:
        return int(connection.execute(select(func.count()).select_from(log_chunks)).scalar_one())


def blob_row(api: Api, attempt_id: str) -> Any:
    with api.store.database.read() as connection:
        return connection.execute(
            select(attempt_logs).where(attempt_logs.c.attempt_id == attempt_id)
        ).one()


def ended_run(
    api: Api, job: str = "hello", worker_id: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A run whose one attempt wrote ``OUTPUT`` (a report per chunk) and succeeded."""
    worker_id = worker_id or register_worker(api)
    run = api.start_run(api.create_job(job)["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    for seq, (stream, text) in enumerate(OUTPUT):
        report(api, worker_id, logs=[log(assignment, seq, text, stream)])
    report(api, worker_id, completions=[completion(assignment)])
    return str(run["id"]), assignment


def test_an_ended_attempts_chunks_become_one_blob_that_reads_the_same(api: Api) -> None:
    run_id, assignment = ended_run(api)
    before = logs(api, run_id)
    paged_before = [logs(api, run_id, after=after, limit=2) for after in (-1, 1, 3)]

    result = api.store.log_compaction.compact_ended()

    assert result.compacted == [assignment["attempt_id"]]
    assert chunk_rows(api) == 0
    assert logs(api, run_id) == before
    assert [logs(api, run_id, after=after, limit=2) for after in (-1, 1, 3)] == paged_before
    assert [(c["stream"], c["text"]) for c in before["chunks"]] == OUTPUT
    blob = blob_row(api, assignment["attempt_id"])
    content = zlib.decompress(blob.data)
    assert blob.sha256 == hashlib.sha256(content).hexdigest()
    assert (blob.run_id, blob.encoding, blob.chunks) == (run_id, "zlib", len(OUTPUT))
    assert (
        blob.content_bytes
        == len(content)
        == sum(HEADER.size + len(text.encode()) for _, text in OUTPUT)
    )
    assert api.store.log_compaction.compact_ended().compacted == []


def test_a_running_attempt_keeps_its_chunks(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    report(api, worker_id, logs=[log(assignment, 0, "still going\n")])

    assert api.store.log_compaction.compact_ended().compacted == []

    assert chunk_rows(api) == 1
    page = logs(api, run["id"])
    assert [c["text"] for c in page["chunks"]] == ["still going\n"]
    assert page["complete"] is False


def test_a_follow_across_the_compaction_neither_skips_nor_repeats(api: Api) -> None:
    """A follower pages two chunks at a time; the attempt ends and is compacted mid-way."""
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    for seq, (stream, text) in enumerate(OUTPUT):
        report(api, worker_id, logs=[log(assignment, seq, text, stream)])
    seen: list[tuple[str, str]] = []
    page = logs(api, run["id"], follow=True, limit=2)
    seen += [(c["stream"], c["text"]) for c in page["chunks"]]
    report(api, worker_id, completions=[completion(assignment)])
    api.store.log_compaction.compact_ended()
    while not page["complete"]:
        page = logs(api, run["id"], follow=True, limit=2, after=page["next_after"])
        seen += [(c["stream"], c["text"]) for c in page["chunks"]]
    assert seen == OUTPUT


@pytest.fixture
def compaction_inside_a_read(api: Api) -> Iterator[list[str]]:
    """Compacts once, committed, just before a logs read asks for the attempt's blob: after
    it read the chunks, which the compaction then deletes. Yields what was compacted."""
    compacted: list[str] = []
    started = False

    def before(connection: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        nonlocal started
        if not started and "FROM attempt_logs" in statement:
            started = True  # the compaction's own reads of attempt_logs pass
            compacted.extend(api.store.log_compaction.compact_ended().compacted)

    engine = api.store.database.engine
    event.listen(engine, "before_cursor_execute", before)
    yield compacted
    event.remove(engine, "before_cursor_execute", before)


def test_a_compaction_between_a_reads_two_looks_loses_nothing(
    api: Api, compaction_inside_a_read: list[str]
) -> None:
    run_id, assignment = ended_run(api)
    page = logs(api, run_id, after=0)
    assert compaction_inside_a_read == [assignment["attempt_id"]]
    assert [(c["stream"], c["text"]) for c in page["chunks"]] == OUTPUT[1:]
    assert [c["seq"] for c in page["chunks"]] == [1, 2, 3, 4]


def late_chunk(api: Api, assignment: dict[str, Any], seq: int, text: str) -> None:
    """A chunk stored after its attempt ended, as a push that passed the fence just before the
    end, and committed just after it, stores it."""
    chunk = OutputChunk.of(assignment["attempt_id"], assignment["attempt"], seq, "stdout",
                           text.encode())  # fmt: skip
    with api.store.database.write() as connection:
        now = api.store.clock.now()
        append_output(connection, assignment["attempt_id"], [chunk], now,
                      api.store.attempts.max_log_bytes)  # fmt: skip


def test_chunks_that_land_after_the_compaction_are_folded_into_the_blob(api: Api) -> None:
    run_id, assignment = ended_run(api)
    api.store.log_compaction.compact_ended()
    late_chunk(api, assignment, 5, "late words\n")
    late_chunk(api, assignment, 2, "a resent chunk is kept once\n")
    expected = [*OUTPUT, ("stdout", "late words\n")]

    assert [(c["stream"], c["text"]) for c in logs(api, run_id)["chunks"]] == expected
    assert api.store.log_compaction.compact_ended().compacted == [assignment["attempt_id"]]
    assert chunk_rows(api) == 0
    assert [(c["stream"], c["text"]) for c in logs(api, run_id)["chunks"]] == expected
    assert blob_row(api, assignment["attempt_id"]).chunks == len(expected)


def test_a_workers_push_after_the_end_is_refused_and_the_log_kept(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    report(
        api, worker_id, logs=[log(assignment, 0, "hello\n")], completions=[completion(assignment)]
    )
    api.store.log_compaction.compact_ended()

    (late,) = report(api, worker_id, logs=[log(assignment, 1, "after the end\n")])

    assert late["status"] == 409
    assert [c["text"] for c in logs(api, run["id"])["chunks"]] == ["hello\n"]
    assert api.store.log_compaction.compact_ended().compacted == []


def test_every_gang_member_is_compacted_on_its_own(api: Api) -> None:
    one = register_worker(api, "one", cpu=1)
    two = register_worker(api, "two", cpu=1)
    gang = api.start_run(api.create_job("gang", replicas=2, resources={"cpu": 1})["id"])
    (a,), (b,) = claim(api, one)["assignments"], claim(api, two)["assignments"]
    for worker_id, member in ((one, a), (two, b)):
        lines = [log(member, seq, f"rank {member['rank']} line {seq}\n") for seq in range(3)]
        report(api, worker_id, logs=lines, completions=[completion(member)])
    before = [logs(api, gang["id"], rank=rank) for rank in (0, 1)]

    assert sorted(api.store.log_compaction.compact_ended().compacted) == sorted(
        [a["attempt_id"], b["attempt_id"]]
    )

    assert [logs(api, gang["id"], rank=rank) for rank in (0, 1)] == before
    assert [c["text"] for c in before[1]["chunks"]] == [f"rank 1 line {n}\n" for n in range(3)]


def test_a_log_at_the_cap_compacts_and_reads_back_whole(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    line = "2026-11-24T03:00:00.123Z INFO [etl.load] wrote batch {n} (9812 records)\n"
    chunk_text = "".join(line.format(n=n) for n in range(4000))[: 256 * 1024]
    seqs = range(33)  # 33 chunks of 256 KiB: past the 8 MiB and 64 KiB cap
    for first in range(0, len(seqs), 3):
        batch = [log(assignment, seq, chunk_text) for seq in seqs[first : first + 3]]
        report(api, worker_id, logs=batch)
    report(api, worker_id, completions=[completion(assignment)])
    before = logs(api, run["id"], limit=10000)
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["attempts"][0]["log_truncated"] is True

    api.store.log_compaction.compact_ended()

    assert logs(api, run["id"], limit=10000) == before
    blob = blob_row(api, assignment["attempt_id"])
    assert blob.content_bytes == 32 * (HEADER.size + 256 * 1024)
    assert blob.stored_bytes < blob.content_bytes / 5


@pytest.mark.parametrize(
    "damage",
    [
        {"data": b"not zlib at all"},
        {"sha256": "0" * 64},
        {"content_bytes": 1},
        {"encoding": "lz4"},
    ],
    ids=["garbled", "other sha256", "other size", "unknown encoding"],
)
def test_a_damaged_blob_is_a_clear_503_not_a_500(api: Api, damage: dict[str, Any]) -> None:
    run_id, assignment = ended_run(api)
    api.store.log_compaction.compact_ended()
    with api.store.database.write() as connection:
        connection.execute(
            update(attempt_logs)
            .where(attempt_logs.c.attempt_id == assignment["attempt_id"])
            .values(**damage)
        )

    response = api.http.get(f"/v1/runs/{run_id}/logs", headers=api.admin)

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert (
        f"the stored output of run {run_id}, attempt 1, rank 0 is damaged"
        in (response.json()["detail"])
    )


def test_late_chunks_of_a_damaged_blob_stay_and_the_others_go_on(api: Api) -> None:
    worker_id = register_worker(api)
    _, damaged = ended_run(api, worker_id=worker_id)
    api.store.log_compaction.compact_ended()
    with api.store.database.write() as connection:
        connection.execute(update(attempt_logs).values(data=b"garbled"))
    late_chunk(api, damaged, 9, "late\n")
    _, other = ended_run(api, "other", worker_id)

    result = api.store.log_compaction.compact_ended()

    assert (result.compacted, result.damaged) == ([other["attempt_id"]], [damaged["attempt_id"]])
    assert chunk_rows(api) == 1  # kept for whoever repairs the blob
    skipped = api.store.log_compaction.compact_ended(skip={damaged["attempt_id"]})
    assert (skipped.compacted, skipped.damaged) == ([], [])


def test_the_scheduler_compacts_under_its_lease_when_attempts_end(api: Api) -> None:
    scheduler = Scheduler(api.store, heartbeat_timeout_seconds=10, lease_seconds=30, listen=False)
    scheduler.start()
    try:
        deadline = time.monotonic() + 5
        while api.store.leases.holder("log-compactor") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        held = api.store.leases.holder("log-compactor")
        assert held is not None
        assert held[0] == scheduler.holder
        time.sleep(0.1)  # past its first pass: the next comes from the notice, not the poll
        run_id, _ = ended_run(api)
        ended = time.monotonic()
        while chunk_rows(api) and time.monotonic() < ended + 4:
            time.sleep(0.02)
        assert chunk_rows(api) == 0, "compacted well before the 5 s poll"
        assert [(c["stream"], c["text"]) for c in logs(api, run_id)["chunks"]] == OUTPUT
    finally:
        scheduler.stop()


@pytest.mark.parametrize("after", [2**31 - 1, 2**31, 2**63, 2**64])
def test_an_after_past_any_seq_reads_nothing_more(api: Api, after: int) -> None:
    run_id, _ = ended_run(api)
    for _ in ("chunks", "blob"):
        page = logs(api, run_id, after=after)
        assert (page["chunks"], page["next_after"], page["complete"]) == ([], after, True)
        api.store.log_compaction.compact_ended()
