"""A schedule's own history: what is unusual about its fires (missed, skipped, replaced,
an error) and changes to it. Its runs' events record ordinary fires."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from herder.store.dialect import insert_rows
from herder.store.schema import schedule_events
from herder.store.work import Work


@dataclass(frozen=True)
class NewScheduleEvent:
    """A line of a schedule's history, before it is recorded."""

    schedule_id: str
    kind: str
    message: str
    scheduled_for: datetime | None = None
    run_id: str | None = None


def record_schedule_events(
    connection: Connection, at: datetime, events: Sequence[NewScheduleEvent]
) -> None:
    """All in one statement, however many (a batch of fires records many)."""
    rows = [
        {"schedule_id": event.schedule_id, "at": at, "kind": event.kind,
         "message": event.message, "scheduled_for": event.scheduled_for, "run_id": event.run_id}
        for event in events
    ]  # fmt: skip
    insert_rows(connection, schedule_events, rows)


def schedule_event(
    connection: Connection,
    schedule_id: str,
    at: datetime,
    kind: str,
    message: str,
    *,
    scheduled_for: datetime | None = None,
    run_id: str | None = None,
) -> None:
    event = NewScheduleEvent(schedule_id, kind, message, scheduled_for, run_id)
    record_schedule_events(connection, at, [event])


def replaced_events(schedule_id: str, run_ids: Sequence[str]) -> list[NewScheduleEvent]:
    message = f"replaced by a newer run of schedule {schedule_id}"
    return [NewScheduleEvent(schedule_id, "replaced", message, run_id=run_id) for run_id in run_ids]


def record_replaced(work: Work, schedule_id: str, run_ids: Sequence[str]) -> None:
    record_schedule_events(work.connection, work.now, replaced_events(schedule_id, run_ids))
