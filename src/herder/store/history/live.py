"""The floor under live rows: no run that has not ended (and no attempt of one) has an id
below it, so the hot path's reads of live rows name it and PostgreSQL prunes every older
time slice at planning — their cost stays that of a few slices however many years of
history the tables hold (measured in ``bench/history_partitions.py``).

A run never comes back once ended (a re-run or a repair is a new run), so the floor only
needs the oldest live run: it is the start of that run's slice, or of the slice an hour
before now if that is older (a new run's id comes from a clock that may lag this one's).
Each process keeps its own floor a few seconds; SQLite's is empty (no slices to prune).
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, func, select

from herder.clock import epoch_ms
from herder.domain.history import slice_of
from herder.domain.ids import id_bound, id_time_ms
from herder.domain.states import TERMINAL_RUN_STATES, RunState
from herder.store.schema import runs

REFRESH_SECONDS = 10.0
CLOCK_LAG_ALLOWANCE = timedelta(hours=1)
_LIVE_STATES = [str(state) for state in RunState if state not in TERMINAL_RUN_STATES]


@dataclass(frozen=True)
class _Floor:
    run_id: str
    at: datetime  # the clock's time when it was read
    read_at: float  # monotonic seconds


_floors: weakref.WeakKeyDictionary[Engine, _Floor] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def live_floor(connection: Connection, now: datetime) -> str:
    """The smallest run id a live run can have (``""`` on SQLite)."""
    if connection.dialect.name != "postgresql":
        return ""
    engine = connection.engine
    with _lock:
        known = _floors.get(engine)
    fresh = known is not None and time.monotonic() - known.read_at < REFRESH_SECONDS
    if known is not None and fresh and known.at <= now:
        return known.run_id
    floor = _Floor(read_live_floor(connection, now), now, time.monotonic())
    with _lock:
        _floors[engine] = floor
    return floor.run_id


def read_live_floor(connection: Connection, now: datetime) -> str:
    """The floor read now, not kept (for the maintenance, that must not act on a stale one)."""
    oldest = connection.execute(
        select(func.min(runs.c.id)).where(runs.c.state.in_(_LIVE_STATES))
    ).scalar()
    since = now - CLOCK_LAG_ALLOWANCE
    if oldest is not None:
        since = min(since, datetime.fromtimestamp(id_time_ms(oldest) / 1000, tz=UTC))
    return id_bound("run", epoch_ms(slice_of(since).start))
