"""Runs past the hot window as users read them: a listing over a window that reaches before
it (the tenant's cold runs merged, newest first, with the hot ones the database gave), and
a run's detail (its id names its day, so one day file is read)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from herder.clock import epoch_ms
from herder.domain.history import slice_of
from herder.domain.ids import id_bound, id_time_ms
from herder.domain.listings import RunQuery
from herder.domain.models import Page, Run, RunDetail
from herder.store.cold.reads import cold_record, cold_runs
from herder.store.cold.tier import ColdTier
from herder.store.pagination import decode_cursor, next_cursor

RUN_ID = re.compile(r"^run_[0-9A-HJKMNP-TV-Z]{26}$")


@dataclass(frozen=True)
class RunWindow:
    """A listing's query over the tenant's runs in its retention, its window starting at
    ``since`` (the query's, which a listing reading the cold tier has)."""

    tenant_id: str
    floor: str  # the first run id inside the tenant's retention
    since: datetime
    query: RunQuery

    def wants(self, run: Run) -> bool:
        query, page = self.query, self.query.page
        return (
            run.id >= self.floor
            and run.created_at >= self.since
            and (query.until is None or run.created_at < query.until)
            and (query.job_id is None or run.job_id == query.job_id)
            and (query.schedule_id is None or run.schedule_id == query.schedule_id)
            and (query.created_by is None or run.created_by == query.created_by)
            and (page.id_prefix is None or run.id.startswith(page.id_prefix))
            and (not query.states or run.state in query.states)
            and (not page.cursor or run.id < decode_cursor(page.cursor))
        )


def merged_page(cold: ColdTier, window: RunWindow, hot: list[Run], now: datetime) -> Page[Run]:
    """The hot runs (up to the page's ``limit + 1``) and the cold ones, newest first. A run is
    in one place only (its slice is detached before it is exported), yet a run listed twice
    would be a worse surprise than a set's cost: ids are unique here."""
    first = max(window.since, datetime.fromtimestamp(id_time_ms(window.floor) / 1000, tz=UTC))
    last = min(window.query.until or now, cold.hot_since(now))
    limit = window.query.page.limit
    found = cold_runs(cold.blobs, window.tenant_id, first, last, window.wants, limit + 1)
    runs = sorted({run.id: run for run in [*hot, *found]}.values(), key=_id, reverse=True)
    return Page(items=runs[:limit], next_cursor=next_cursor([run.id for run in runs], limit))


def cold_detail(
    cold: ColdTier, tenant_id: str, run_id: str, floor: str, now: datetime
) -> RunDetail | None:
    """The run, when its id is a well-formed one made inside the tenant's retention and
    before the hot window, and the tenant's day file holds it."""
    record = cold_run_record(cold, tenant_id, run_id, floor, now)
    return None if record is None else RunDetail.model_validate(record)


def cold_run_record(
    cold: ColdTier, tenant_id: str, run_id: str, floor: str, now: datetime
) -> dict[str, Any] | None:
    """The run's line in its day file (``cold_detail``'s conditions), as it was exported."""
    hot_floor = id_bound("run", epoch_ms(cold.hot_since(now)))
    if not (RUN_ID.match(run_id) and floor <= run_id < hot_floor):
        return None
    made = made_at(run_id)
    return cold_record(cold.blobs, tenant_id, slice_of(made), made.date(), run_id)


def made_at(run_id: str) -> datetime:
    return datetime.fromtimestamp(id_time_ms(run_id) / 1000, tz=UTC)


def _id(run: Run) -> str:
    return run.id
