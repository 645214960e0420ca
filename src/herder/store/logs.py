"""Attempt output: appended by the worker while the attempt runs (fenced like every report),
read back by users in order, bounded per attempt."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update

from herder.clock import Clock
from herder.domain.errors import NotFound
from herder.domain.models import LogChunk
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.schema import attempts, log_chunks, runs

MAX_LOG_BYTES_PER_ATTEMPT = 8 * 1024 * 1024


@dataclass(frozen=True)
class OutputChunk:
    seq: int  # per attempt, from the worker: a resent chunk is stored once
    stream: str
    data: bytes


@dataclass(frozen=True)
class LogPage:
    chunks: list[LogChunk]
    next_after: int  # pass back as ``after`` to read on
    attempt: int | None  # the attempt these came from (the newest unless asked)
    attempt_running: bool


class LogRepository:
    def __init__(
        self, database: Database, clock: Clock, *, max_bytes: int = MAX_LOG_BYTES_PER_ATTEMPT
    ) -> None:
        self._db = database
        self._clock = clock
        self._max_bytes = max_bytes

    def append(
        self, worker_id: str, attempt_id: str, attempt: int, chunks: list[OutputChunk]
    ) -> bool:
        """Store the chunks if the attempt is current; ``False`` if it is not (refuse it)."""
        now = self._clock.now()
        with self._db.write() as connection:
            stored = connection.execute(
                select(attempts.c.log_bytes).where(
                    attempts.c.id == attempt_id,
                    attempts.c.number == attempt,
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                )
            ).scalar()
            if stored is None:
                return False
            room = self._max_bytes - stored
            kept, truncated = [], False
            for chunk in chunks:
                if len(chunk.data) > room:
                    truncated = True
                    break
                room -= len(chunk.data)
                kept.append(chunk)
            for chunk in kept:
                connection.execute(
                    insert_ignoring_duplicates(
                        self._db,
                        log_chunks,
                        attempt_id=attempt_id,
                        seq=chunk.seq,
                        stream=chunk.stream,
                        data=chunk.data,
                        at=now,
                    )
                )
            values: dict[str, object] = {"log_bytes": self._max_bytes - room}
            if truncated:
                values["log_truncated"] = True
            connection.execute(update(attempts).where(attempts.c.id == attempt_id).values(**values))
        return True

    def read(
        self,
        tenant_id: str,
        run_id: str,
        *,
        attempt: int | None = None,
        after: int = -1,
        limit: int = 1000,
    ) -> LogPage:
        with self._db.read() as connection:
            attempt_count = connection.execute(
                select(runs.c.attempt_count).where(
                    runs.c.tenant_id == tenant_id, runs.c.id == run_id
                )
            ).scalar()
            if attempt_count is None:
                raise NotFound(f"run {run_id} not found")
            number = attempt if attempt is not None else attempt_count
            row = connection.execute(
                select(attempts.c.id, attempts.c.state).where(
                    attempts.c.run_id == run_id, attempts.c.number == number
                )
            ).first()
            if row is None:
                if attempt is not None:
                    raise NotFound(f"run {run_id} has no attempt {attempt}")
                return LogPage(chunks=[], next_after=after, attempt=None, attempt_running=False)
            rows = connection.execute(
                select(log_chunks.c.seq, log_chunks.c.stream, log_chunks.c.data, log_chunks.c.at)
                .where(log_chunks.c.attempt_id == row.id, log_chunks.c.seq > after)
                .order_by(log_chunks.c.seq)
                .limit(limit)
            ).all()
        chunks = [
            LogChunk(
                attempt=number,
                seq=chunk.seq,
                stream=chunk.stream,
                text=bytes(chunk.data).decode("utf-8", errors="replace"),
                at=chunk.at,
            )
            for chunk in rows
        ]
        return LogPage(
            chunks=chunks,
            next_after=chunks[-1].seq if chunks else after,
            attempt=number,
            attempt_running=row.state == AttemptState.RUNNING,
        )
