"""A run listing over a window that reaches before the hot window: the cold tier's runs of
the tenant merged, newest first, with the hot ones the database gave."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from herder.domain.ids import id_time_ms
from herder.domain.models import Page, Run
from herder.domain.states import RunState
from herder.store.cold.reads import cold_runs
from herder.store.cold.tier import ColdTier
from herder.store.pagination import decode_cursor, encode_cursor


@dataclass(frozen=True)
class RunWindow:
    """What a listing asks for, as ``RunRepository.list`` takes it."""

    tenant_id: str
    floor: str  # the first run id inside the tenant's retention
    since: datetime
    until: datetime | None
    job_id: str | None
    id_prefix: str | None
    states: Sequence[RunState]
    cursor: str | None

    def wants(self, run: Run) -> bool:
        return (
            run.id >= self.floor
            and run.created_at >= self.since
            and (self.until is None or run.created_at < self.until)
            and (self.job_id is None or run.job_id == self.job_id)
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
    more = len(runs) > limit
    return Page(items=runs[:limit], next_cursor=encode_cursor(runs[limit - 1].id) if more else None)


def _id(run: Run) -> str:
    return run.id
