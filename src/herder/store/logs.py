"""Attempt output, read back by users in order (workers append it through reports)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from herder.clock import Clock
from herder.domain.errors import NotFound
from herder.domain.models import LogChunk
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.schema import attempts, log_chunks, runs


@dataclass(frozen=True)
class LogPage:
    chunks: list[LogChunk]
    next_after: int  # pass back as ``after`` to read on
    attempt: int | None  # the attempt these came from (the newest unless asked)
    attempt_running: bool


class LogRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

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
                    attempts.c.run_id == run_id,
                    attempts.c.number == number,
                    attempts.c.rank == rank,
                )
            ).first()
            if row is None:
                if attempt is not None or rank:
                    raise NotFound(f"run {run_id} has no attempt {number} of rank {rank}")
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
