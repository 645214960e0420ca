"""Events as they arrive (``domain.events``, docs/events.md): the reads and guarded writes of
receiving one (``app.events``) — the sender's id taken first, unique per tenant, so a repeat
records nothing; the event recorded with what its triggers started and the waits it ended —
and events as users read them, kept ``EVENT_RETENTION_DAYS``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from herder.clock import Clock
from herder.domain.events import EVENT_RETENTION_DAYS, Event, EventSummary, TriggerOutcome
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import events, workflows

PRUNED_PER_PASS = 5_000  # events (and deliveries) past retention one maintenance pass deletes
_SUMMARY_COLUMNS = [c for c in events.c if c.name not in ("payload", "sender_key", "tenant_id")]


def _summary(row: Any) -> EventSummary:
    return EventSummary.model_validate(dict(row._mapping))


def _event(row: Any) -> Event:
    return Event.model_validate(dict(row._mapping))


class EventRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def get(self, tenant_id: str, event_id: str) -> Event:
        with self._db.read() as connection:
            return _event(owned_row(connection, events, tenant_id, event_id, "event"))

    def list(self, tenant_id: str, *, name: str | None, page: PageRequest) -> Page[EventSummary]:
        """Newest first, without their payloads."""
        query = select(*_SUMMARY_COLUMNS).where(events.c.tenant_id == tenant_id)
        if name is not None:
            query = query.where(events.c.name == name)
        with self._db.read() as connection:
            return page_of(connection, query, events.c.id, _summary, page)

    def prune(self) -> bool:
        """Delete up to ``PRUNED_PER_PASS`` events past the retention; whether more may be
        left."""
        oldest = self._clock.now() - timedelta(days=EVENT_RETENTION_DAYS)
        with self._db.write() as connection:
            doomed = select(events.c.id).where(events.c.received_at < oldest).limit(PRUNED_PER_PASS)
            gone = connection.execute(delete(events).where(events.c.id.in_(doomed))).rowcount
        return bool(gone == PRUNED_PER_PASS)


@dataclass(frozen=True)
class NewEvent:
    """An event's row as it arrives, before its outcomes are known."""

    id: str
    tenant_id: str
    name: str
    source: str
    sender_id: str | None
    sender_key: str | None  # the sender's id, scoped to where it came from: unique per tenant
    payload: Any
    received_at: datetime

    def columns(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


def first_event(connection: Connection, tenant_id: str, sender_key: str) -> Event | None:
    """The event recorded under the sender's id, if any."""
    row = connection.execute(
        select(events).where(events.c.tenant_id == tenant_id, events.c.sender_key == sender_key)
    ).first()
    return None if row is None else _event(row)


def claim_sender_key(database: Database, connection: Connection, event: NewEvent) -> bool:
    """Insert the event, its outcomes to come — unless its sender's id is taken (False): a
    repeat waits here until a concurrent first commits or rolls back."""
    claimed = connection.execute(
        insert_ignoring_duplicates(database, events, **event.columns(), outcomes=[]).returning(
            events.c.id
        )
    ).scalar()
    return claimed is not None


def record_event(
    connection: Connection,
    event: NewEvent,
    outcomes: list[TriggerOutcome],
    resumed: list[str],
) -> None:
    """The event with what it started and ended: inserted, or — its sender's id claimed
    first — its claimed row completed."""
    said = {"outcomes": [one.model_dump(mode="json") for one in outcomes], "resumed": resumed}
    connection.execute(
        insert(events).values(**event.columns(), **said)
        if event.sender_key is None
        else update(events).where(events.c.id == event.id).values(**said)
    )


def workflow_ids(connection: Connection, tenant_id: str, names: set[str | None]) -> dict[str, str]:
    """The tenant's workflows of these names (name → id)."""
    wanted = sorted(name for name in names if name is not None)
    if not wanted:
        return {}
    rows = connection.execute(
        select(workflows.c.name, workflows.c.id).where(
            workflows.c.tenant_id == tenant_id, workflows.c.name.in_(wanted)
        )
    )
    return {row.name: row.id for row in rows}
