"""Receiving an event (docs/events.md, docs/design.md §4): sent to ``POST /v1/events``, or an
inbound webhook's verified delivery (``app.hooks``), which ends here.

    read      the sender's id seen before? the tenant's triggers and waits on the event's name
              (a read transaction, closed before deciding: no snapshot held)
    decide    pure and bounded, outside the write transaction (``domain.event_evaluation``):
              each trigger's start or refusal, the waits the event ends, what it costs
    charge    its submissions past the first, to the tenant's rate (may refuse it: 429)
    apply     one unit of work: the sender's id taken first (a repeat answers with the first
              event, starting nothing); the job runs submitted as one batch
              (``app.submit.submit_within``: debounce, limits, pools, priority bound), each
              workflow run started under a savepoint; the waits that still wait ended
    record    in the same unit of work: the event with each trigger's outcome (the run it
              started, or why not: a refused start refuses neither the event nor the other
              triggers), and a webhook's delivery
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from herder.app.submit import submit_within
from herder.app.work import unit_of_work
from herder.clock import epoch_ms
from herder.domain.actors import event_actor
from herder.domain.errors import Conflict, HerderError, TooLarge
from herder.domain.event_evaluation import charged, evaluate
from herder.domain.events import (
    MAX_PAYLOAD_BYTES,
    Event,
    EventRequest,
    ReceivedEvent,
    TriggerOutcome,
    document,
)
from herder.domain.hooks import DeliveryStatus, is_replay
from herder.domain.ids import new_id
from herder.domain.models import Principal
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.submit_rate import bucket_shape
from herder.domain.triggers import Refused, Start
from herder.store.events import (
    NewEvent,
    claim_sender_key,
    first_event,
    record_event,
    workflow_ids,
)
from herder.store.hooks import DeliveryRecord, first_signed_at, record_delivery
from herder.store.jobs import jobs_named
from herder.store.store import Store
from herder.store.triggers import for_event
from herder.store.work import Work
from herder.store.workflows.starts import start_in
from herder.store.workflows.waits import resume_waiting, waiting_for
from herder.telemetry import metrics

Admit = Callable[[int], None]  # takes this many submissions from the tenant's rate, or 429


@dataclass(frozen=True)
class Arrival:
    """An event as it arrives: whose, what, from where, under which id of its sender's."""

    tenant_id: str
    name: str
    payload: Any
    source: str
    sender_id: str | None
    sender_key: str | None  # the sender's id, scoped to where it came from
    delivery: DeliveryRecord | None = None  # an inbound webhook's, recorded with the event


def send_event(
    store: Store, caller: Principal, request: EventRequest, admit: Admit | None = None
) -> ReceivedEvent:
    """``POST /v1/events``: the caller's event, admitted already for one submission;
    ``admit`` takes what its triggers' filters cost past that one."""
    size = len(json.dumps(request.payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_PAYLOAD_BYTES:
        raise TooLarge(f"the payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
    arrival = Arrival(
        caller.tenant_id, request.name, request.payload, f"api:{caller.key_id}", request.id,
        None if request.id is None else f"api:{request.id}",
    )  # fmt: skip
    received, _ = receive_event(store, arrival, admit)
    return received


def receive_event(
    store: Store, arrival: Arrival, admit: Admit | None
) -> tuple[ReceivedEvent, DeliveryStatus | None]:
    """Record the event and start what its triggers say (the stages in the module's
    docstring), or — when its sender's id was seen already — answer with the first event,
    starting nothing. A webhook's delivery is recorded with it, its status said: accepted,
    a duplicate, or a replay (rejected); one whose signed digest the hook accepted before
    raises ``Replayed``, undoing the event."""
    tenant_id, sender_key = arrival.tenant_id, arrival.sender_key
    # read
    with store.database.read() as connection:
        seen = sender_key is not None and first_event(connection, tenant_id, sender_key) is not None
        triggers = [] if seen else for_event(connection, tenant_id, arrival.name)
        waits = [] if seen else waiting_for(connection, tenant_id, arrival.name)
    # decide (a repeat decides nothing: the unit of work answers with the first)
    evaluation = evaluate(triggers, waits, document(arrival.name, arrival.source, arrival.payload))
    # charge
    if admit is not None and evaluation.submissions > 1:
        shape = bucket_shape(store.access.tenant_quotas(tenant_id))
        more = charged(evaluation.submissions, None if shape is None else shape.capacity)
        if more:
            admit(more)
    with unit_of_work(store) as work:
        # apply: the sender's id first, then the runs, then the waits
        event = NewEvent(
            new_id("evt", epoch_ms(work.now)), tenant_id, arrival.name, arrival.source,
            arrival.sender_id, sender_key, arrival.payload, work.now,
        )  # fmt: skip
        if sender_key is not None and not claim_sender_key(work.database, work.connection, event):
            first = first_event(work.connection, tenant_id, sender_key)
            if first is None:  # only while a concurrent first is rolled back
                raise Conflict("an event with this id is being recorded; retry", field="id")
            status = _delivered_again(work, arrival.delivery, first.id)
            return ReceivedEvent(event=first, duplicate=True), status
        outcomes = _start(store, work, tenant_id, event.id, evaluation.decided)
        resumed = resume_waiting(work, event.id, arrival.name, arrival.payload, evaluation.awaited)
        # record
        record_event(work.connection, event, outcomes, resumed)
        if arrival.delivery is not None:
            accepted = replace(arrival.delivery, status=DeliveryStatus.ACCEPTED, event_id=event.id)
            record_delivery(work.connection, accepted, work.now)
    metrics.event_received(arrival.source.partition(":")[0], outcomes)
    recorded = Event(
        id=event.id, name=event.name, source=event.source, sender_id=event.sender_id,
        received_at=event.received_at, outcomes=outcomes, resumed=resumed,
        payload=event.payload,
    )  # fmt: skip
    status = None if arrival.delivery is None else DeliveryStatus.ACCEPTED
    return ReceivedEvent(event=recorded, duplicate=False), status


def _delivered_again(
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
    store: Store,
    work: Work,
    tenant_id: str,
    event_id: str,
    decided: Sequence[Start | Refused],
) -> list[TriggerOutcome]:
    """Each decision's outcome, in order: the job runs submitted as one batch, each workflow
    run started under a savepoint (a refused start undoes only itself)."""
    named_jobs = {d.trigger.job for d in decided if d.trigger.job is not None}
    found = jobs_named(work.connection, tenant_id, named_jobs) if named_jobs else {}
    job_ids = {name: job.id for name, job in found.items()}
    workflows = workflow_ids(work.connection, tenant_id, {d.trigger.workflow for d in decided})
    outcomes: dict[int, TriggerOutcome] = {}
    requests: list[tuple[int, RunRequest]] = []
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
        elif trigger.workflow not in workflows:
            outcomes[position] = TriggerOutcome(
                **named, error=f"workflow {trigger.workflow} not found"
            )
        else:
            outcomes[position] = _start_workflow(
                work, tenant_id, workflows[trigger.workflow], decision, named, event_id
            )
    submitted = (
        submit_within(
            store,
            work,
            tenant_id,
            [r for _, r in requests],
            actor=event_actor(event_id),
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
    work: Work,
    tenant_id: str,
    workflow_id: str,
    decision: Start,
    named: dict[str, str],
    event_id: str,
) -> TriggerOutcome:
    params = dict(decision.params)
    savepoint = work.connection.begin_nested()
    try:
        run_id = start_in(work, tenant_id, workflow_id, params, created_by=event_actor(event_id))
    except HerderError as refused:
        savepoint.rollback()
        return TriggerOutcome(**named, error=_said(refused))
    savepoint.commit()
    return TriggerOutcome(**named, workflow_run_id=run_id)
