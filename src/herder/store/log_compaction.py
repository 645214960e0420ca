"""Compaction: an ended attempt's log chunks become one blob (``log_blobs``) in
``attempt_logs``, and its chunks are deleted, in one transaction per batch.

Off the hot path: settling an attempt writes nothing here; the compactor (``control``) finds
ended attempts that still have chunks. Chunks that land after their attempt was compacted (a
push that passed the fence while the attempt was being ended) are found the same way and
folded into the blob by compacting it again — nothing is lost, a seq is kept once.

Each batch locks its attempts' rows first: every append of output updates its attempt's row,
so no chunk of theirs can commit between the read of the chunks and their delete.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, text, update

from herder.clock import Clock
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.log_blobs import ENCODING, Blob, DamagedLog, StoredChunk, pack, unpack
from herder.store.schema import attempt_logs, attempts, log_chunks

log = logging.getLogger("herder.store")

BATCH_ATTEMPTS = 200
BATCH_BYTES = 32 * 1024 * 1024  # of chunks read per transaction (at least one attempt's)

# The distinct attempts in log_chunks, one index probe each (a loose index scan): the table
# holds only live attempts and those not compacted yet, and ids sort by age, oldest first.
_ENDED_WITH_CHUNKS = text(
    """
    WITH RECURSIVE chunked(attempt_id) AS (
        SELECT (SELECT attempt_id FROM log_chunks ORDER BY attempt_id LIMIT 1)
        UNION ALL
        SELECT (SELECT c.attempt_id FROM log_chunks c WHERE c.attempt_id > chunked.attempt_id
                ORDER BY c.attempt_id LIMIT 1)
        FROM chunked WHERE chunked.attempt_id IS NOT NULL
    )
    SELECT a.id, a.log_bytes FROM chunked JOIN attempts a ON a.id = chunked.attempt_id
    WHERE a.state <> :running
    LIMIT :limit
    """
)


@dataclass(frozen=True)
class CompactionPass:
    compacted: list[str]  # attempt ids whose chunks are now in their blob
    damaged: list[str]  # attempts whose blob could not be read: their chunks were left
    more: bool  # the batch was full: more may be waiting


class LogCompactionRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def compact_ended(
        self, *, skip: Collection[str] = (), batch: int = BATCH_ATTEMPTS
    ) -> CompactionPass:
        """Compact the oldest ended attempts that have chunks, but not those in ``skip``."""
        now = self._clock.now()
        with self._db.write() as connection:
            attempt_ids, more = _pick(connection, skip, batch)
            if not attempt_ids:
                return CompactionPass([], [], more=False)
            owners = _lock_ended(connection, attempt_ids)
            chunks = _chunks(connection, list(owners))
            earlier = _existing(connection, list(owners))
            blobs: dict[str, Blob] = {}
            damaged = []
            for attempt_id in owners:
                try:
                    blobs[attempt_id] = pack(
                        merged_chunks(earlier.get(attempt_id), chunks.get(attempt_id, []))
                    )
                except DamagedLog as error:
                    log.error("cannot compact attempt %s again: its log blob is damaged: %s",
                              attempt_id, error.detail)  # fmt: skip
                    damaged.append(attempt_id)
            _write(connection, blobs, owners, set(earlier), now)
        return CompactionPass(list(blobs), damaged, more=more)


def _pick(connection: Connection, skip: Collection[str], batch: int) -> tuple[list[str], bool]:
    """Up to ``batch`` ended attempts with chunks, and up to ``BATCH_BYTES`` of them."""
    rows = connection.execute(
        _ENDED_WITH_CHUNKS,
        {"running": str(AttemptState.RUNNING), "limit": batch + len(skip)},
    ).all()
    picked: list[str] = []
    total = 0
    for attempt_id, log_bytes in rows:
        if attempt_id in skip:
            continue
        if picked and (len(picked) == batch or total + log_bytes > BATCH_BYTES):
            return picked, True
        picked.append(attempt_id)
        total += log_bytes
    return picked, len(rows) == batch + len(skip)


def _lock_ended(connection: Connection, attempt_ids: list[str]) -> dict[str, str]:
    """The run of each attempt still ended, its row locked (see the module's docstring)."""
    rows = connection.execute(
        select(attempts.c.id, attempts.c.run_id)
        .where(attempts.c.id.in_(attempt_ids))
        .where(attempts.c.state != AttemptState.RUNNING)
        .order_by(attempts.c.id)  # two compactors lock in one order
        .with_for_update()
    )
    return {row.id: row.run_id for row in rows}


def _write(
    connection: Connection,
    blobs: dict[str, Blob],
    owners: dict[str, str],
    replaced: set[str],
    now: datetime,
) -> None:
    """Each blob stored (a new row, or over the attempt's earlier blob) and its chunks gone."""
    new_rows = []
    for attempt_id, blob in blobs.items():
        row = {"sha256": blob.sha256, "encoding": ENCODING, "content_bytes": blob.content_bytes,
               "stored_bytes": len(blob.data), "chunks": blob.chunks, "compacted_at": now,
               "data": blob.data}  # fmt: skip
        if attempt_id in replaced:
            connection.execute(
                update(attempt_logs).where(attempt_logs.c.attempt_id == attempt_id).values(**row)
            )
        else:
            new_rows.append({"attempt_id": attempt_id, "run_id": owners[attempt_id], **row})
    if new_rows:
        connection.execute(insert(attempt_logs), new_rows)
    if blobs:
        connection.execute(delete(log_chunks).where(log_chunks.c.attempt_id.in_(list(blobs))))


def _chunks(connection: Connection, attempt_ids: list[str]) -> dict[str, list[StoredChunk]]:
    by_attempt: dict[str, list[StoredChunk]] = {}
    rows = connection.execute(
        select(log_chunks.c.attempt_id, log_chunks.c.seq, log_chunks.c.stream,
               log_chunks.c.data, log_chunks.c.at)
        .where(log_chunks.c.attempt_id.in_(attempt_ids))
        .order_by(log_chunks.c.attempt_id, log_chunks.c.seq)
    )  # fmt: skip
    for row in rows:
        chunk = StoredChunk(row.seq, row.stream, bytes(row.data), row.at)
        by_attempt.setdefault(row.attempt_id, []).append(chunk)
    return by_attempt


def _existing(connection: Connection, attempt_ids: list[str]) -> dict[str, Any]:
    """The blobs of attempts compacted before (their late chunks are being folded in)."""
    rows = connection.execute(
        select(attempt_logs).where(attempt_logs.c.attempt_id.in_(attempt_ids))
    ).all()
    return {row.attempt_id: row for row in rows}


def merged_chunks(earlier: Any, chunks: list[StoredChunk]) -> list[StoredChunk]:
    """The earlier blob's chunks with the new ones, in seq order; a seq in both is kept once."""
    if earlier is None:
        return chunks
    by_seq = {chunk.seq: chunk for chunk in chunks}
    by_seq.update({chunk.seq: chunk for chunk in read_blob(earlier)})
    return [by_seq[seq] for seq in sorted(by_seq)]


def read_blob(row: Any) -> list[StoredChunk]:
    """The chunks of an ``attempt_logs`` row (``DamagedLog`` when they cannot be read)."""
    return unpack(
        bytes(row.data), encoding=row.encoding, sha256=row.sha256,
        content_bytes=row.content_bytes,
    )  # fmt: skip
