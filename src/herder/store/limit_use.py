"""What the dispatcher reads and writes of limits by key (``domain.placement.limits``): the
limits its queued runs name, the starts within each rate's period of their keys, and a row
for each start of a rate-limited key. Only the queue window's keys are read, so a million
keys cost nothing until their runs are queued."""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, bindparam, delete, func, insert, select

from herder.domain.limits import MAX_RATE_PERIOD_SECONDS, LimitSpec
from herder.domain.placement.limits import LimitKey
from herder.domain.placement.snapshot import KeyStarts, LimitView, Snapshot
from herder.store.dialect import Among
from herder.store.schema import limit_starts, limits

PRUNE_BATCH = 10_000  # starts deleted per statement once past the longest period


def with_limits(connection: Connection, snapshot: Snapshot) -> Snapshot:
    """The snapshot with the limits its queued runs name and their keys' recent starts
    (nothing read when no queued run names a limit)."""
    keys = {name for run in snapshot.queued for name in run.limit_keys}
    if not keys:
        return snapshot
    statements = _statements(connection.dialect.name)
    views: dict[str, LimitView] = {}
    for params in statements.limit_ids.batches(sorted({limit_id for limit_id, _ in keys})):
        for limit_id, name, spec in connection.execute(statements.limits, params):
            views[limit_id] = _view(limit_id, name, spec)
    by_limit: dict[str, list[str]] = defaultdict(list)
    for limit_id, key in keys:
        if limit_id in views and views[limit_id].rate_count is not None:
            by_limit[limit_id].append(key)
    starts: dict[LimitKey, KeyStarts] = {}
    for limit_id, limit_keys in by_limit.items():
        since = snapshot.now - timedelta(seconds=views[limit_id].rate_period_seconds)
        for params in statements.keys.batches(sorted(limit_keys), limit_id=limit_id, since=since):
            for key, count, oldest in connection.execute(statements.starts, params):
                starts[(limit_id, key)] = KeyStarts(count, oldest)
    return replace(snapshot, limits=views, limit_starts=starts)


@functools.lru_cache(maxsize=65_536)
def limit_keys_of(text: str | None) -> tuple[LimitKey, ...]:
    """A run's ``limit_keys`` read as text (``[[limit id, key], ...]``), parsed once per
    distinct value: many runs share their keys."""
    if not text:
        return ()
    return tuple((str(limit_id), str(key)) for limit_id, key in json.loads(text) or ())


def record_starts(connection: Connection, started: Iterable[LimitKey], now: datetime) -> None:
    """A start now for each (limit, key) given (one per placed run and rate-limited key)."""
    rows = [{"limit_id": limit_id, "key": key, "started_at": now} for limit_id, key in started]
    if rows:
        connection.execute(insert(limit_starts), rows)


def prune_starts(connection: Connection, now: datetime) -> int:
    """Forget starts older than the longest period a rate may have; how many went."""
    before = now - timedelta(seconds=MAX_RATE_PERIOD_SECONDS)
    oldest = (
        select(limit_starts.c.id)
        .where(limit_starts.c.started_at < before)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    return connection.execute(delete(limit_starts).where(limit_starts.c.id.in_(oldest))).rowcount


def _view(limit_id: str, name: str, spec: Any) -> LimitView:
    parsed = LimitSpec.model_validate(spec)
    rate = parsed.rate
    return LimitView(
        limit_id,
        name,
        max_running=parsed.max_running,
        rate_count=rate.count if rate is not None else None,
        rate_period_seconds=rate.period_seconds if rate is not None else 60,
    )


class _Statements:
    def __init__(self, dialect: str) -> None:
        self.limit_ids = Among(dialect, limits.c.id, "limit_ids")
        self.limits: Select[Any] = select(limits.c.id, limits.c.name, limits.c.spec).where(
            self.limit_ids.condition
        )
        self.keys = Among(dialect, limit_starts.c.key, "keys")
        self.starts: Select[Any] = (
            select(
                limit_starts.c.key,
                func.count(),
                func.min(limit_starts.c.started_at),
            )
            .where(
                limit_starts.c.limit_id == bindparam("limit_id"),
                limit_starts.c.started_at > bindparam("since"),
                self.keys.condition,
            )
            .group_by(limit_starts.c.key)
        )


@functools.cache
def _statements(dialect: str) -> _Statements:
    return _Statements(dialect)
