"""A run's output, a page at a time, and whether more of it can still come."""

from __future__ import annotations

from typing import NamedTuple

from herder.domain.models import LogChunk
from herder.store.store import Store


class LogRead(NamedTuple):
    attempt: int | None  # the attempt the chunks came from; None before the first
    chunks: list[LogChunk]
    next_after: int  # pass back as ``after`` to read on
    active: bool  # the attempt (or, before its first, the run) may still write more
    complete: bool  # nothing more will come after this page


def read(
    store: Store,
    tenant_id: str,
    run_id: str,
    *,
    attempt: int | None,
    rank: int,
    after: int,
    limit: int,
) -> LogRead:
    page = store.logs.read(tenant_id, run_id, attempt=attempt, rank=rank, after=after, limit=limit)
    active = page.active
    return LogRead(
        attempt=page.attempt,
        chunks=page.chunks,
        next_after=page.next_after,
        active=active,
        complete=not active and len(page.chunks) < limit,
    )
