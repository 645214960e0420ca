"""Attempt output: appended from workers' reports (bounded per attempt, a resent chunk
stored once), read back by users in order — from its chunks while the attempt runs, from its
compacted blob (``log_compaction``) once it has ended, or from both during the move; a run
past the hot window's from the cold tier (``cold.log_reads``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from herder.clock import Clock
from herder.domain.errors import NotFound
from herder.domain.models import LogChunk
from herder.domain.states import AttemptState, RunState
from herder.protocol import OutputChunk
from herder.store.cold.log_reads import cold_attempt_log, cold_run_of_log
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.dialect import insert_rows_ignoring_duplicates
from herder.store.history.live import live_floor
from herder.store.history.retention import visible_runs_floor
from herder.store.log_blobs import DamagedLog, StoredChunk
from herder.store.log_compaction import read_blob
from herder.store.schema import attempt_logs, attempts, log_chunks, runs

log = logging.getLogger("herder.store")

MAX_LOG_BYTES_PER_ATTEMPT = 8 * 1024 * 1024 + 64 * 1024  # the worker's 8 MiB and its marker
MAX_SEQ = 2**31 - 1  # the column's range on PostgreSQL: an ``after`` past it reads nothing more


def append_output(
    connection: Connection,
    attempt_id: str,
    chunks: Sequence[OutputChunk],
    now: datetime,
    max_bytes: int,
) -> None:
    """Store what fits under the attempt's cap; the rest is dropped and the log marked
    truncated. The caller has checked the attempt is the worker's current one. A chunk sent
    again (its report's answer was lost) is stored once and counted once: only the chunks
    inserted add to ``log_bytes``."""
    this_attempt = (attempts.c.id == attempt_id, attempts.c.run_id >= live_floor(connection, now))
    stored = connection.execute(select(attempts.c.log_bytes).where(*this_attempt)).scalar_one()
    room = max_bytes - stored
    kept = []
    for chunk in chunks:
        if len(chunk.data) > room:
            break
        room -= len(chunk.data)
        kept.append(chunk)
    rows = [
        {"attempt_id": attempt_id, "seq": chunk.seq, "stream": chunk.stream, "data": chunk.data,
         "at": now}
        for chunk in kept
    ]  # fmt: skip
    inserted = set(insert_rows_ignoring_duplicates(connection, log_chunks, rows, log_chunks.c.seq))
    added = sum(len(chunk.data) for chunk in kept if chunk.seq in inserted)
    values: dict[str, object] = {"log_bytes": stored + added}
    if len(kept) < len(chunks):
        values["log_truncated"] = True
    connection.execute(update(attempts).where(*this_attempt).values(**values))


@dataclass(frozen=True)
class LogPage:
    chunks: list[LogChunk]
    next_after: int  # pass back as ``after`` to read on
    attempt: int | None  # the attempt these came from (the newest unless asked)
    active: bool  # the attempt (or, before its first, the run) may still write more


class LogRepository:
    def __init__(self, database: Database, clock: Clock, cold: ColdTier | None = None) -> None:
        self._db = database
        self._clock = clock
        self._cold = cold  # a cold run's log is read from it (PostgreSQL)

    def read(
        self,
        tenant_id: str,
        run_id: str,
        *,
        attempt: int | None = None,
        rank: int = 0,
        after: int = -1,
        limit: int = 1000,
    ) -> LogPage:
        now = self._clock.now()
        with self._db.read() as connection:
            floor = visible_runs_floor(connection, tenant_id, now)
            run = connection.execute(
                select(runs.c.attempt_count, runs.c.state).where(
                    runs.c.tenant_id == tenant_id, runs.c.id == run_id, runs.c.id >= floor
                )
            ).first()
            if run is None:
                return self._read_cold(tenant_id, run_id, floor, now, attempt, rank, after, limit)
            number = attempt if attempt is not None else run.attempt_count
            row = connection.execute(
                select(attempts.c.id, attempts.c.state).where(
                    attempts.c.run_id == run_id,
                    attempts.c.number == number,
                    attempts.c.rank == rank,
                )
            ).first()
            if row is None:
                if attempt is not None or rank:
                    raise NotFound(f"run {run_id} has no attempt {number} of rank {rank}")
                return LogPage([], after, None, RunState(run.state).is_active)
            # The chunks first, then the blob: output only ever moves from chunks into the
            # blob, so a compaction committing between the two reads cannot hide any of it.
            rows = connection.execute(
                select(log_chunks.c.seq, log_chunks.c.stream, log_chunks.c.data, log_chunks.c.at)
                .where(log_chunks.c.attempt_id == row.id, log_chunks.c.seq > min(after, MAX_SEQ))
                .order_by(log_chunks.c.seq)
                .limit(limit)
            ).all()
            blob = connection.execute(
                select(attempt_logs).where(attempt_logs.c.attempt_id == row.id)
            ).first()
        found = [StoredChunk(c.seq, c.stream, bytes(c.data), c.at) for c in rows]
        if blob is not None:
            found += _compacted(blob, run_id, number, rank)
        return _page(found, number, after, limit, row.state == AttemptState.RUNNING)

    def _read_cold(
        self,
        tenant_id: str,
        run_id: str,
        floor: str,
        now: datetime,
        attempt: int | None,
        rank: int,
        after: int,
        limit: int,
    ) -> LogPage:
        """A run past the hot window: its log from the cold tier (it has ended)."""
        cold = None if self._cold is None else cold_run_of_log(self._cold, tenant_id, run_id,
                                                                floor, now)  # fmt: skip
        if self._cold is None or cold is None:
            raise NotFound(f"run {run_id} not found")
        number = attempt if attempt is not None else cold.attempt_count
        found = [a for a in cold.attempts if a["number"] == number and a["rank"] == rank]
        if not found:
            if attempt is not None or rank:
                raise NotFound(f"run {run_id} has no attempt {number} of rank {rank}")
            return LogPage([], after, None, RunState(cold.run_state).is_active)
        named = f"run {run_id}, attempt {number}, rank {rank}"
        chunks = cold_attempt_log(self._cold, tenant_id, run_id, found[0]["id"], named)
        return _page(chunks, number, after, limit, found[0]["state"] == AttemptState.RUNNING)


def _page(found: list[StoredChunk], number: int, after: int, limit: int, running: bool) -> LogPage:
    """The chunks after ``after`` (a seq stored twice, in the chunks and the blob, once),
    in seq order, up to ``limit``."""
    by_seq = {chunk.seq: chunk for chunk in found if chunk.seq > after}
    chunks = [
        LogChunk(
            attempt=number,
            seq=chunk.seq,
            stream=chunk.stream,
            text=chunk.data.decode("utf-8", errors="replace"),
            at=chunk.at,
        )
        for chunk in (by_seq[seq] for seq in sorted(by_seq)[:limit])
    ]
    return LogPage(chunks, chunks[-1].seq if chunks else after, number, running)


def _compacted(blob: Any, run_id: str, number: int, rank: int) -> list[StoredChunk]:
    try:
        return read_blob(blob)
    except DamagedLog as error:
        log.error("the log blob of attempt %s is damaged: %s", blob.attempt_id, error.detail)
        raise DamagedLog(
            f"the stored output of run {run_id}, attempt {number}, rank {rank} is damaged "
            f"({error.detail}); it was logged for the operator"
        ) from error
