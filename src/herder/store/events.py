"""Events as they arrive (``domain.events``, docs/events.md): recorded, de-duplicated by the
sender's id, and the work their triggers start and the workflow tasks waiting for them that
they end — in one transaction, so an event accepted has started its runs and an event
refused has started none. What that work is was decided before, outside it
(``domain.event_evaluation``): no filter is evaluated while the writer's lock is held.

A trigger's job runs go through the same submission as a user's (debounce, limits, pools,
priority bound) and its workflow runs through the same start; a start refused (a parameter
that misfits, a workflow that forbids another run…) is recorded in the event's outcomes
and does not refuse the event or its other triggers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, HerderError
from herder.domain.event_evaluation import evaluate
from herder.domain.events import (
    EVENT_RETENTION_DAYS,
    Event,
    EventSummary,
    ReceivedEvent,
    TriggerOutcome,
    document,
)
from herder.domain.hooks import DeliveryStatus, is_replay
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.triggers import Refused, Start
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.hooks import DeliveryRecord, first_signed_at, record_delivery
from herder.store.jobs import jobs_named
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.runs.repository import RunRepository
from herder.store.schema import events, workflows
from herder.store.triggers import for_event
from herder.store.work import Work, unit_of_work
from herder.store.workflows.starts import start_in
from herder.store.workflows.waits import resume_waiting, waiting_for
from herder.telemetry import metrics

PRUNED_PER_PASS = 5_000  # events (and deliveries) past retention one maintenance pass deletes
_SUMMARY_COLUMNS = [c for c in events.c if c.name not in ("payload", "sender_key", "tenant_id")]


def _summary(row: Any) -> EventSummary:
    return EventSummary.model_validate(dict(row._mapping))


def _event(row: Any) -> Event:
    return Event.model_validate(dict(row._mapping))


class EventRepository:
    def __init__(
        self, database: Database, clock: Clock, rng: random.Random, runs: RunRepository
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._runs = runs

    def receive(
        self,
        tenant_id: str,
        name: str,
        payload: Any,
        *,
        source: str,
        sender_id: str | None,
        sender_key: str | None,
        delivery: DeliveryRecord | None = None,
        charge: Callable[[int], None] | None = None,
    ) -> tuple[ReceivedEvent, DeliveryStatus | None]:
        """Record the event and start what its triggers say, or — when ``sender_key`` was
        seen already — answer with the first event, starting nothing. An inbound webhook's
        ``delivery`` is recorded in the same transaction, with its status: accepted, a
        duplicate, or a replay (rejected).

        What the event does is decided first, outside the write transaction (bounded:
        ``domain.event_evaluation``), on its tenant's triggers and waits as they are when it
        arrives; ``charge`` is then told the submissions it costs (its first included) when
        they are more than one, and may refuse it (its error leaves here, nothing written).
        The write transaction only records the event, starts its runs and ends the waits
        that still wait."""
        with self._db.read() as connection:  # closed before evaluating: no snapshot held
            seen = sender_key is not None and _first(connection, tenant_id, sender_key) is not None
            triggers = [] if seen else for_event(connection, tenant_id, name)
            waits = [] if seen else waiting_for(connection, tenant_id, name)
        # A repeat decides nothing: the write below answers with the first.
        evaluation = evaluate(triggers, waits, document(name, source, payload))
        if charge is not None and evaluation.submissions > 1:
            charge(evaluation.submissions)
        with unit_of_work(self._db, self._clock, self._rng) as work:
            event_id = new_id("evt", epoch_ms(work.now))
            row = {"id": event_id, "tenant_id": tenant_id, "name": name, "source": source,
                   "sender_id": sender_id, "sender_key": sender_key, "payload": payload,
                   "received_at": work.now}  # fmt: skip
            if sender_key is not None:  # the sender's id is taken first: a repeat waits here
                inserted = work.connection.execute(
                    insert_ignoring_duplicates(self._db, events, **row, outcomes=[]).returning(
                        events.c.id
                    )
                ).scalar()
                if inserted is None:
                    first = _first(work.connection, tenant_id, sender_key)
                    if first is None:  # only while a concurrent first is rolled back
                        raise Conflict("an event with this id is being recorded; retry", field="id")
                    status = _record_again(work, delivery, first.id)
                    return ReceivedEvent(event=first, duplicate=True), status
            outcomes = _start(work, self._runs, tenant_id, event_id, evaluation.decided)
            resumed = resume_waiting(work, event_id, name, payload, evaluation.awaited)
            said = {
                "outcomes": [one.model_dump(mode="json") for one in outcomes],
                "resumed": resumed,
            }
            work.connection.execute(
                insert(events).values(**row, **said)
                if sender_key is None
                else update(events).where(events.c.id == event_id).values(**said)
            )
            if delivery is not None:
                accepted = replace(delivery, status=DeliveryStatus.ACCEPTED, event_id=event_id)
                record_delivery(work.connection, accepted, work.now)
        metrics.event_received(source.partition(":")[0], outcomes)
        event = Event(
            id=event_id, name=name, source=source, sender_id=sender_id, received_at=work.now,
            outcomes=outcomes, resumed=resumed, payload=payload,
        )  # fmt: skip
        return ReceivedEvent(event=event, duplicate=False), (
            None if delivery is None else DeliveryStatus.ACCEPTED
        )

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


def _first(connection: Connection, tenant_id: str, sender_key: str | None) -> Event | None:
    row = connection.execute(
        select(events).where(events.c.tenant_id == tenant_id, events.c.sender_key == sender_key)
    ).first()
    return None if row is None else _event(row)


def _record_again(
    work: Work, delivery: DeliveryRecord | None, event_id: str
) -> DeliveryStatus | None:
    """A delivery whose id was accepted before: recorded as a duplicate or a replay."""
    if delivery is None or delivery.delivery_id is None:
        return None
    first = first_signed_at(work.connection, delivery.hook_id, delivery.delivery_id)
    if is_replay(first, delivery.signed_at):
        refused = replace(
            delivery, status=DeliveryStatus.REJECTED, http_status=401, event_id=event_id,
            reason=f"a replay of delivery {delivery.delivery_id}, accepted as {event_id}",
        )  # fmt: skip
    else:
        refused = replace(
            delivery, status=DeliveryStatus.DUPLICATE, http_status=200, event_id=event_id
        )
    record_delivery(work.connection, refused, work.now)
    return refused.status


def _start(
    work: Work,
    runs: RunRepository,
    tenant_id: str,
    event_id: str,
    decided: Sequence[Start | Refused],
) -> list[TriggerOutcome]:
    """Each decision's outcome, in order: the job runs submitted as one batch, each workflow
    run started under a savepoint (a refused start undoes only itself)."""
    named_jobs = {d.trigger.job for d in decided if d.trigger.job is not None}
    found = jobs_named(work.connection, tenant_id, named_jobs) if named_jobs else {}
    job_ids = {name: job.id for name, job in found.items()}
    workflow_ids = _ids(
        work.connection, workflows, tenant_id, {d.trigger.workflow for d in decided}
    )
    outcomes: dict[int, TriggerOutcome] = {}
    requests: list[tuple[int, RunRequest]] = []
    actor = f"event:{event_id}"
    for position, decision in enumerate(decided):
        trigger = decision.trigger
        named = {"trigger_id": trigger.id, "trigger_name": trigger.name}
        if isinstance(decision, Refused):
            outcomes[position] = TriggerOutcome(**named, error=decision.error)
        elif trigger.job is not None:
            if trigger.job not in job_ids:
                outcomes[position] = TriggerOutcome(**named, error=f"job {trigger.job} not found")
            else:
                overrides = RunOverrides(params=dict(decision.params))
                requests.append((position, RunRequest(job_ids[trigger.job], overrides, None)))
        elif trigger.workflow not in workflow_ids:
            outcomes[position] = TriggerOutcome(
                **named, error=f"workflow {trigger.workflow} not found"
            )
        else:
            outcomes[position] = _start_workflow(
                work, tenant_id, workflow_ids[trigger.workflow], decision, named
            )
    submitted = (
        runs.submit_within(
            work,
            tenant_id,
            [r for _, r in requests],
            actor=actor,
            jobs={(tenant_id, job.id): job for job in found.values()},
        )
        if requests
        else []
    )
    for (position, _), answer in zip(requests, submitted, strict=True):
        trigger = decided[position].trigger
        named = {"trigger_id": trigger.id, "trigger_name": trigger.name}
        outcomes[position] = TriggerOutcome(
            **named,
            run_id=answer.run_id,
            error=None if answer.error is None else _said(answer.error),
        )
    return [outcomes[position] for position in range(len(decided))]


def _said(error: HerderError) -> str:
    return error.detail if error.field is None else f"{error.field}: {error.detail}"


def _start_workflow(
    work: Work, tenant_id: str, workflow_id: str, decision: Start, named: dict[str, str]
) -> TriggerOutcome:
    params = dict(decision.params)
    savepoint = work.connection.begin_nested()
    try:
        run_id = start_in(work, tenant_id, workflow_id, params)
    except HerderError as refused:
        savepoint.rollback()
        return TriggerOutcome(**named, error=_said(refused))
    savepoint.commit()
    return TriggerOutcome(**named, workflow_run_id=run_id)


def _ids(
    connection: Connection, table: Any, tenant_id: str, names: set[str | None]
) -> dict[str, str]:
    wanted = sorted(name for name in names if name is not None)
    if not wanted:
        return {}
    rows = connection.execute(
        select(table.c.name, table.c.id).where(
            table.c.tenant_id == tenant_id, table.c.name.in_(wanted)
        )
    )
    return {row.name: row.id for row in rows}
