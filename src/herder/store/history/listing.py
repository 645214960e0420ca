"""Newest-first listings over years of weekly slices: read a window of recent slices at a
time, widening until the page is full.

One ``ORDER BY id DESC LIMIT n`` over every slice makes PostgreSQL plan all of them (tens of
milliseconds at a year of slices, growing with the years) and, for a selective filter such as
one job, fetch and sort the filter's rows of every slice before the limit. A window bounded on
both sides is pruned to its few slices while planning, and a page is usually full after the
first (bench/history_scale.py). The rows and their order are the same as one statement's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, Select

from herder.clock import epoch_ms
from herder.domain.ids import id_bound, id_time_ms
from herder.domain.listings import PageRequest
from herder.store.pagination import check_limit, decode_cursor, encode_cursor
from herder.store.schema import runs

# How far back each read reaches from the page's top (now, or the cursor's run); the last
# read goes down to the floor. Growing by 4 keeps a sparse job's page to a few reads.
WINDOWS = tuple(timedelta(weeks=weeks) for weeks in (1, 4, 16, 64, 256))
CREATOR_SCAN_ROWS = 10_000  # a creator's page reads at most this many runs (``newest_made_by``)


def newest_runs(
    connection: Connection,
    query: Select[tuple[object, ...]],
    floor: str,
    now: datetime,
    page: PageRequest,
) -> Sequence[Row[Any]]:
    """Up to the page's ``limit + 1`` rows of ``query`` at or above ``floor``, newest first,
    from below its cursor if given (``page_query``'s contract)."""
    check_limit(page.limit)
    top = decode_cursor(page.cursor) if page.cursor else None
    return _newest(connection, query, floor, now, top, page.limit + 1)


def newest_made_by(
    connection: Connection,
    query: Select[tuple[object, ...]],
    creator: str,
    floor: str,
    now: datetime,
    page: PageRequest,
) -> tuple[Sequence[Row[Any]], str | None]:
    """The page's rows of ``query`` that ``creator`` made, reading at most
    ``CREATOR_SCAN_ROWS`` of its rows, and the cursor to read on when that many were read
    before the page filled (else None: ``page_from`` says whether there is more).

    No index serves a creator: one on ``runs`` would be written at every transition of every
    run, the hot path. So a creator with few runs among many gets short pages, each with a
    cursor to read on, and never one page that reads a tenant's whole history."""
    check_limit(page.limit)
    top = decode_cursor(page.cursor) if page.cursor else None
    columns = query.with_only_columns(runs.c.id, runs.c.created_by)
    scanned = _newest(connection, columns, floor, now, top, CREATOR_SCAN_ROWS)
    wanted = [row.id for row in scanned if row.created_by == creator][: page.limit + 1]
    rows: Sequence[Row[Any]] = []
    if wanted:
        rows = connection.execute(
            query.where(runs.c.id.in_(wanted)).order_by(runs.c.id.desc())
        ).all()
    short = len(wanted) <= page.limit and len(scanned) == CREATOR_SCAN_ROWS
    return rows, encode_cursor(scanned[-1].id) if short else None


def _newest(
    connection: Connection,
    query: Select[tuple[object, ...]],
    floor: str,
    now: datetime,
    top: str | None,
    count: int,
) -> list[Row[Any]]:
    """Up to ``count`` rows of ``query`` below ``top`` (if given) and at or above ``floor``,
    newest first, read a window of slices at a time."""
    reach_from = now if top is None else _made_at(top, now)
    rows: list[Row[Any]] = []
    upper = top
    for window in (*WINDOWS, None):
        lower = floor
        if window is not None:
            lower = max(floor, id_bound("run", max(0, epoch_ms(reach_from - window))))
        if top is not None:  # never above the cursor, which bounds every read
            lower = min(lower, top)
        bounded = query.where(runs.c.id >= lower)
        if upper is not None:
            bounded = bounded.where(runs.c.id < upper)
        statement = bounded.order_by(runs.c.id.desc()).limit(count - len(rows))
        rows += connection.execute(statement).all()
        if len(rows) >= count or lower <= floor:
            break
        upper = lower
    return rows


def _made_at(top: str, now: datetime) -> datetime:
    """When the cursor's run was made; ``now`` for a cursor from the future or one no id of
    ours spells (a letter outside Crockford's), which reads from ``now`` down as well."""
    if top >= id_bound("run", epoch_ms(now)):
        return now
    try:
        return datetime.fromtimestamp(id_time_ms(top) / 1000, UTC)
    except ValueError:
        return now
