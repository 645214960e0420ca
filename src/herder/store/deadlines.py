"""Deadlines missed, inside the reaper's unit of work: runs and workflow runs unfinished past
their ``deadline_at`` are marked (``deadline_missed_at``) by one guarded UPDATE each — the
mark is the fence: a row marked, or ended, meanwhile is not found again — then what the
domain decides (``lifecycle.missed``) is applied: a timeline line, and the cancel a deadline
asks for. A bounded batch a pass; the partial index holds only rows still to judge."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Table, func, select, update

from herder.domain.deadlines import UNKNOWN_SCHEDULE, Deadline, told_fire
from herder.domain.lifecycle.cancel import Cause
from herder.domain.lifecycle.missed import Missed, missed_message, missed_runs
from herder.domain.lifecycle.reap import REAPER
from herder.store.history.live import live_floor
from herder.store.runs.facts import cancellable_runs
from herder.store.schema import runs, schedules, workflow_runs
from herder.store.unit import Work
from herder.store.workflows.starts import cancel_in
from herder.telemetry import metrics

BATCH = 500  # of each kind, a pass


@dataclass(frozen=True)
class MissedNow:
    runs: int
    workflow_runs: int
    cancels: tuple[Missed, ...] = ()  # workflow runs whose deadline asks for a cancel

    @property
    def more(self) -> bool:
        """A full batch: more may be waiting."""
        return max(self.runs, self.workflow_runs) >= BATCH


def judge_deadlines(work: Work) -> MissedNow:
    """Mark and record what missed its deadline, and cancel the runs whose deadline asks
    for it; how many were, and the workflow runs to cancel (``cancel_missed``) once the
    drain has moved on those the runs' ends touched."""
    found_runs = _mark(work, runs, [runs.c.spec, runs.c.job_name])
    found_workflow_runs = _mark(work, workflow_runs, [workflow_runs.c.deadline,
                                                      workflow_runs.c.workflow_name])  # fmt: skip
    fires = fires_of(work.connection, [*found_runs, *found_workflow_runs])
    missed = [missed_of(row, spec_deadline(row.spec), row.job_name, fires)
              for row in found_runs]  # fmt: skip
    cancels = [one.id for one in missed if one.cancel]
    cancellable, workers = (
        cancellable_runs(work.connection, select(runs.c.id).where(runs.c.id.in_(cancels)))
        if cancels
        else ([], set())
    )
    work.apply(missed_runs(missed, cancellable, workers, work.now))
    missed_workflow_runs = [missed_of(row, row.deadline, row.workflow_name, fires)
                            for row in found_workflow_runs]  # fmt: skip
    counted = MissedNow(
        len(found_runs), len(found_workflow_runs),
        tuple(one for one in missed_workflow_runs if one.cancel),
    )  # fmt: skip
    work.after_commit.append(lambda: _count(counted))
    return counted


def cancel_missed(work: Work, missed: MissedNow) -> None:
    """Cancel the workflow runs whose missed deadline asks for it."""
    for one in missed.cancels:
        cancel_in(work, one.id, Cause(REAPER, missed_message(one)))


def next_deadline(work: Work) -> datetime | None:
    """The earliest deadline still to judge (``None``: none)."""
    floor = live_floor(work.connection, work.now)
    moments: list[datetime] = []
    for table, live in ((runs, [runs.c.id >= floor]), (workflow_runs, [])):
        moment = work.connection.execute(
            select(func.min(table.c.deadline_at)).where(*_waiting(table), *live)
        ).scalar()
        if moment is not None:
            moments.append(moment)
    return min(moments, default=None)


def _waiting(table: Table) -> list[Any]:
    """The partial index's own condition, so that it is the one used."""
    return [
        table.c.deadline_at.is_not(None),
        table.c.deadline_missed_at.is_(None),
        table.c.finished_at.is_(None),
    ]


def _mark(work: Work, table: Table, extra: Sequence[Any]) -> list[Any]:
    """Mark up to a batch of the table's rows past their deadline; the rows marked."""
    live = [table.c.id >= live_floor(work.connection, work.now)] if table is runs else []
    due = (
        select(table.c.id)
        .where(*_waiting(table), table.c.deadline_at <= work.now, *live)
        .order_by(table.c.deadline_at)
        .limit(BATCH)
    )
    return list(
        work.connection.execute(
            update(table)
            .where(table.c.id.in_(due), *_waiting(table), *live)
            .values(deadline_missed_at=work.now)
            .returning(table.c.id, table.c.tenant_id, table.c.deadline_at,
                       table.c.schedule_id, table.c.scheduled_for, *extra)
        ).all()
    )  # fmt: skip


def spec_deadline(spec: Any) -> Any:
    """The deadline a run's stored spec holds (the one it runs under)."""
    return spec.get("deadline") if isinstance(spec, dict) else None


def fires_of(connection: Connection, rows: Iterable[Any]) -> dict[str, tuple[str, str]]:
    """The cron and zone of the schedules that fired these rows: what their fires' wall times
    are."""
    schedule_ids = sorted({row.schedule_id for row in rows if row.scheduled_for is not None})
    if not schedule_ids:
        return {}
    return {
        row.id: (str(row.spec.get("cron", "")), str(row.spec.get("timezone", "UTC")))
        for row in connection.execute(
            select(schedules.c.id, schedules.c.spec).where(schedules.c.id.in_(schedule_ids))
        )
        if isinstance(row.spec, dict)  # else a server bug: told in UTC
    }


def missed_of(row: Any, deadline: Any, name: str, fires: dict[str, tuple[str, str]]) -> Missed:
    """A row marked missed (its id, tenant, deadline and fire) as the domain names it. A
    stored deadline that fails its model (a server bug) is told as none and cancels nothing:
    one bad row must not stop every pass."""
    try:
        spec = Deadline.model_validate(deadline) if deadline else None
    except ValidationError:
        spec = None
    fire = None
    if row.scheduled_for is not None:
        cron, timezone = fires.get(row.schedule_id or "", UNKNOWN_SCHEDULE)
        fire = told_fire(row.scheduled_for, cron, timezone)
    return Missed(
        id=row.id, tenant_id=row.tenant_id, name=name, deadline_at=row.deadline_at,
        within_seconds=spec.within_seconds if spec else 0, cancel=bool(spec and spec.cancel),
        fire=fire,
    )  # fmt: skip


def _count(counted: MissedNow) -> None:
    metrics.deadlines_missed("run", counted.runs)
    metrics.deadlines_missed("workflow_run", counted.workflow_runs)
