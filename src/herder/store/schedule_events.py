"""A schedule's own history: what is unusual about its fires (missed, skipped, replaced,
an error) and changes to it. Its runs' events record ordinary fires."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, insert

from herder.store.schema import schedule_events
from herder.store.work import Work


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
    connection.execute(
        insert(schedule_events).values(
            schedule_id=schedule_id,
            at=at,
            kind=kind,
            message=message,
            scheduled_for=scheduled_for,
            run_id=run_id,
        )
    )


def record_replaced(work: Work, schedule_id: str, run_ids: Sequence[str]) -> None:
    message = f"replaced by a newer run of schedule {schedule_id}"
    for run_id in run_ids:
        schedule_event(work.connection, schedule_id, work.now, "replaced", message, run_id=run_id)
