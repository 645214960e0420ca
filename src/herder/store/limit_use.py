"""What the dispatcher reads and writes of limits by key (``domain.placement.limits``): the
limits its queued runs name, the starts within each rate's period of their keys and each
key's last start; a row for each start of a rate-limited key, and each started key's last
start. Only the queue window's keys are read, so a million keys cost nothing until their
runs are queued."""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, delete, insert, or_, select, text, tuple_
from sqlalchemy.dialects import postgresql, sqlite

from herder.domain.limits import MAX_RATE_PERIOD_SECONDS, LimitSpec
from herder.domain.placement.limits import LimitKey
from herder.domain.placement.snapshot import KeyStarts, LimitView, Snapshot
from herder.domain.states import ACTIVE_RUN_STATES, RunState
from herder.store.dialect import Among
from herder.store.schema import limit_last_starts, limit_starts, limits, run_limit_keys, runs

PRUNE_BATCH = 10_000  # starts deleted per statement once past the longest period
LAST_START_KEPT_SECONDS = 86_400  # a key's last start longer ago is as none: keys tie on it


def with_limits(connection: Connection, snapshot: Snapshot) -> Snapshot:
    """The snapshot with the limits its queued runs name, their keys' recent starts and
    last starts (nothing read when no queued run names a limit)."""
    keys = {name for run in snapshot.queued for name in run.limit_keys}
    if not keys:
        return snapshot
    views = _views(connection, keys)
    starts = _starts(connection, views, keys, snapshot.now)
    # the last start of every key of a limit that exists, one statement for all
    named = [{"limit": limit_id, "key": key} for limit_id, key in sorted(keys) if limit_id in views]
    last: dict[LimitKey, datetime] = {}
    if named:
        read = _statements(connection.dialect.name).last_starts
        for limit_id, key, started in connection.execute(read, {"keys": json.dumps(named)}):
            last[(limit_id, key)] = _read_time(started)
    return replace(snapshot, limits=views, limit_starts=starts, limit_last_starts=last)


@dataclass(frozen=True)
class KeysMeasured:
    """Keys as applying a plan measures them, their limits locked: the limits (those that
    still exist), each key's running runs and its starts within its rate's period."""

    limits: dict[str, LimitView]
    running: dict[LimitKey, int]
    starts: dict[LimitKey, KeyStarts]


def measure_keys(
    connection: Connection, keys: Collection[LimitKey], now: datetime, floor: str
) -> KeysMeasured:
    """Lock the limits ``keys`` name (in id order, as a submission deciding under them does)
    and measure the keys: what another placer committed is counted, what it is placing now
    waits for its commit."""
    views = _views(connection, keys, locked=True)
    named = [{"limit": limit_id, "key": key} for limit_id, key in sorted(keys) if limit_id in views]
    running: dict[LimitKey, int] = {}
    if named:
        read = _statements(connection.dialect.name).running
        parameters = {"keys": json.dumps(named), "floor": floor, "running": RunState.RUNNING}
        for limit_id, key, count in connection.execute(read, parameters):
            running[(limit_id, key)] = count
    return KeysMeasured(views, running, _starts(connection, views, keys, now))


def _views(
    connection: Connection, keys: Collection[LimitKey], *, locked: bool = False
) -> dict[str, LimitView]:
    statements = _statements(connection.dialect.name)
    read = statements.locked_limits if locked else statements.limits
    views: dict[str, LimitView] = {}
    for params in statements.limit_ids.batches(sorted({limit_id for limit_id, _ in keys})):
        for limit_id, name, spec in connection.execute(read, params):
            views[limit_id] = _view(limit_id, name, spec)
    return views


def _starts(
    connection: Connection, views: dict[str, LimitView], keys: Collection[LimitKey], now: datetime
) -> dict[LimitKey, KeyStarts]:
    """The starts within its period of each rate-limited key, one statement for all."""
    wanted = []
    for limit_id, key in sorted(keys):
        view = views.get(limit_id)
        if view is not None and view.rate_count is not None:
            since = now - timedelta(seconds=view.rate_period_seconds)
            wanted.append({"limit": limit_id, "key": key, "since": _stored_time(connection, since)})
    starts: dict[LimitKey, KeyStarts] = {}
    if wanted:
        read = _statements(connection.dialect.name).starts
        for limit_id, key, count, oldest in connection.execute(read, {"keys": json.dumps(wanted)}):
            starts[(limit_id, key)] = KeyStarts(count, _read_time(oldest))
    return starts


@functools.lru_cache(maxsize=65_536)
def limit_keys_of(stored: str | None) -> tuple[LimitKey, ...]:
    """A run's ``limit_keys`` read as text (``[[limit id, key], ...]``), parsed once per
    distinct value: many runs share their keys."""
    if not stored:
        return ()
    return tuple((str(limit_id), str(key)) for limit_id, key in json.loads(stored) or ())


def record_starts(connection: Connection, started: Iterable[LimitKey], now: datetime) -> None:
    """A start now for each (limit, key) given (one per placed run and rate-limited key)."""
    rows = [{"limit_id": limit_id, "key": key, "started_at": now} for limit_id, key in started]
    if rows:
        connection.execute(insert(limit_starts), rows)


def record_last_starts(connection: Connection, started: Iterable[LimitKey], now: datetime) -> None:
    """Each (limit, key) given started a run now: its last start, for the keys' turns (one
    statement for all, the keys once each: a key takes one row)."""
    rows = [
        {"limit_id": limit_id, "key": key, "started_at": now}
        for limit_id, key in sorted(set(started))
    ]
    if rows:
        connection.execute(_statements(connection.dialect.name).last_start, rows)


def forget_ended_keys(connection: Connection) -> int:
    """Forget a batch of the keys of runs that ended (or are gone): only active runs'
    keys are counted (gauges, a key's listing, strategies at submit); how many went."""
    active = [str(state) for state in ACTIVE_RUN_STATES]
    ended = (
        select(run_limit_keys.c.run_id)
        .outerjoin(runs, runs.c.id == run_limit_keys.c.run_id)
        .where(or_(runs.c.id.is_(None), runs.c.state.not_in(active)))
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    gone = delete(run_limit_keys).where(run_limit_keys.c.run_id.in_(ended))
    return connection.execute(gone).rowcount


def prune_starts(connection: Connection, now: datetime) -> int:
    """Forget starts older than the longest period a rate may have, and last starts older
    than ``LAST_START_KEPT_SECONDS``; how many went (the larger)."""
    before = now - timedelta(seconds=MAX_RATE_PERIOD_SECONDS)
    oldest = (
        select(limit_starts.c.id)
        .where(limit_starts.c.started_at < before)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    gone = connection.execute(delete(limit_starts).where(limit_starts.c.id.in_(oldest))).rowcount
    kept_from = now - timedelta(seconds=LAST_START_KEPT_SECONDS)
    stale = (
        select(limit_last_starts.c.limit_id, limit_last_starts.c.key)
        .where(limit_last_starts.c.started_at < kept_from)
        .limit(PRUNE_BATCH)
    )
    gone_last = connection.execute(
        delete(limit_last_starts).where(
            tuple_(limit_last_starts.c.limit_id, limit_last_starts.c.key).in_(stale)
        )
    ).rowcount
    return max(gone, gone_last)


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
        self.locked_limits = self.limits.order_by(limits.c.id).with_for_update(
            key_share=True
        )  # FOR NO KEY UPDATE: a run's key (a foreign key) is not locked out
        self.starts = _STARTS[dialect]
        self.running = _RUNNING[dialect]
        self.last_starts = _LAST_STARTS[dialect]
        upsert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(
            limit_last_starts
        )
        self.last_start = upsert.on_conflict_do_update(
            index_elements=[limit_last_starts.c.limit_id, limit_last_starts.c.key],
            set_={"started_at": upsert.excluded.started_at},
        )


# The starts of the given keys, each within its own period (the keys as one JSON parameter:
# [{"limit": id, "key": key, "since": time}, ...]), driven by the keys through the (limit,
# key, time) index.
_STARTS = {
    "postgresql": text(
        "SELECT s.limit_id, s.key, count(*), min(s.started_at)"
        ' FROM json_to_recordset(CAST(:keys AS json)) AS k("limit" text, key text,'
        " since timestamptz)"
        ' JOIN limit_starts s ON s.limit_id = k."limit" AND s.key = k.key'
        " AND s.started_at > k.since"
        " GROUP BY s.limit_id, s.key"
    ),
    "sqlite": text(
        "SELECT s.limit_id, s.key, count(*), min(s.started_at)"
        " FROM json_each(:keys) AS k"
        " JOIN limit_starts s ON s.limit_id = json_extract(k.value, '$.limit')"
        " AND s.key = json_extract(k.value, '$.key')"
        " AND s.started_at > json_extract(k.value, '$.since')"
        " GROUP BY s.limit_id, s.key"
    ),
}


# The running runs of the given keys ([{"limit": id, "key": key}, ...]), as placement counts
# them (a run once, however many members), driven by the keys through the (limit, key, run)
# index; only the live slices of ``runs``.
_RUNNING = {
    "postgresql": text(
        "SELECT k.limit_id, k.key, count(*)"
        ' FROM json_to_recordset(CAST(:keys AS json)) AS w("limit" text, key text)'
        ' JOIN run_limit_keys k ON k.limit_id = w."limit" AND k.key = w.key'
        " JOIN runs r ON r.id = k.run_id AND r.id >= :floor AND r.state = :running"
        " GROUP BY k.limit_id, k.key"
    ),
    "sqlite": text(
        "SELECT k.limit_id, k.key, count(*)"
        " FROM json_each(:keys) AS w"
        " JOIN run_limit_keys k ON k.limit_id = json_extract(w.value, '$.limit')"
        " AND k.key = json_extract(w.value, '$.key')"
        " JOIN runs r ON r.id = k.run_id AND r.id >= :floor AND r.state = :running"
        " GROUP BY k.limit_id, k.key"
    ),
}


# The last starts of the given keys ([{"limit": id, "key": key}, ...]), by primary key.
_LAST_STARTS = {
    "postgresql": text(
        "SELECT t.limit_id, t.key, t.started_at"
        ' FROM json_to_recordset(CAST(:keys AS json)) AS k("limit" text, key text)'
        ' JOIN limit_last_starts t ON t.limit_id = k."limit" AND t.key = k.key'
    ),
    "sqlite": text(
        "SELECT t.limit_id, t.key, t.started_at"
        " FROM json_each(:keys) AS k"
        " JOIN limit_last_starts t ON t.limit_id = json_extract(k.value, '$.limit')"
        " AND t.key = json_extract(k.value, '$.key')"
    ),
}


def _stored_time(connection: Connection, moment: datetime) -> str:
    """A time as the JSON parameter carries it: as SQLite stores it (naive UTC text, which
    compares as the times do), or ISO 8601 with its offset for PostgreSQL."""
    if connection.dialect.name == "sqlite":
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return moment.isoformat()


def _read_time(value: Any) -> datetime:
    """``min(started_at)`` comes back as the driver gives it (text on SQLite)."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@functools.cache
def _statements(dialect: str) -> _Statements:
    return _Statements(dialect)
