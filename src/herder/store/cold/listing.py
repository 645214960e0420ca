"""Runs past the hot window as users read them: a listing over a window that reaches before
it (the tenant's cold runs merged, newest first, with the hot ones the database gave), and
a run's detail (its id names its day, so one day file is read)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from herder.clock import epoch_ms
from herder.domain.history import slice_of
from herder.domain.ids import id_bound, id_time_ms
from herder.domain.models import Page, Run, RunDetail
from herder.domain.states import RunState
from herder.store.cold.reads import cold_record, cold_runs
from herder.store.cold.tier import ColdTier
from herder.store.pagination import decode_cursor, next_cursor

RUN_ID = re.compile(r"^run_[0-9A-HJKMNP-TV-Z]{26}$")


@dataclass(frozen=True)
class RunWindow:
    """What a listing asks for, as ``RunRepository.list`` takes it."""

    tenant_id: str
    floor: str  # the first run id inside the tenant's retention
    since: datetime
    until: datetime | None
    job_id: str | None
    schedule_id: str | None
    id_prefix: str | None
    states: Sequence[RunState]
    cursor: str | None

    def wants(self, run: Run) -> bool:
        return (
            run.id >= self.floor
            and run.created_at >= self.since
            and (self.until is None or run.created_at < self.until)
            and (self.job_id is None or run.job_id == self.job_id)
            and (self.schedule_id is None or run.schedule_id == self.schedule_id)
            and (self.id_prefix is None or run.id.startswith(self.id_prefix))
            and (not self.states or run.state in self.states)
            and (not self.cursor or run.id < decode_cursor(self.cursor))
        )


def merged_page(
    cold: ColdTier, window: RunWindow, hot: list[Run], limit: int, now: datetime
) -> Page[Run]:
    """The hot runs (up to ``limit + 1`` of them) and the cold ones, newest first. A run is
    in one place only (its slice is detached before it is exported), yet a run listed twice
    would be a worse surprise than a set's cost: ids are unique here."""
    first = max(window.since, datetime.fromtimestamp(id_time_ms(window.floor) / 1000, tz=UTC))
    last = min(window.until or now, cold.hot_since(now))
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
