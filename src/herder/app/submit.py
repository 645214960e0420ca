"""Submitting runs: one, or many at once — a user's, an event's triggers' (docs/design.md §4).

Each is one unit of work of one shape:

    read      the jobs; the pools the tenant may use; its ``max_priority``
    decide    each request's new run, or why this one is refused (``runs.submissions``)
    fold      a debouncing limit's submissions into its key's waiting run
              (``runs.debouncing``), then the runs under their limits' strategies
              (``runs.limit_rooms``: queued, cancelled, dropped)
    apply     the runs inserted (``Work.apply``); the unique key (tenant, idempotency key)
              makes a repeat insert nothing
    answer    each request's run: new, the one its key made before, or a debounce's waiting
              run that stands for it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herder.app.work import unit_of_work
from herder.domain.errors import Invalid
from herder.domain.lifecycle.changes import Changes, NewRun
from herder.domain.lifecycle.concurrency import admit, forbidden
from herder.domain.lifecycle.priority import check_allowed
from herder.domain.models import Job, Run
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.schedules import ConcurrencyPolicy
from herder.store.owned import owned_row
from herder.store.pools import check_usable, usable_pools
from herder.store.runs.debouncing import debounced
from herder.store.runs.facts import active_of_schedule
from herder.store.runs.limit_rooms import by_limits
from herder.store.runs.priority import max_priority
from herder.store.runs.submissions import (
    Submitted,
    key_reused,
    new_or_refused,
    new_run,
    queue,
    runs_by_key,
    submitted,
)
from herder.store.runs.writes import new_run_row
from herder.store.schedule_events import record_replaced
from herder.store.schema import schedules
from herder.store.store import Store
from herder.store.work import Work


def submit(
    store: Store,
    tenant_id: str,
    job_id: str,
    overrides: RunOverrides,
    *,
    idempotency_key: str | None = None,
    actor: str = "user",
    as_schedule: str | None = None,
) -> tuple[Run, bool]:
    """A queued one-off run, and whether it is new. With an idempotency key the unique
    constraint (tenant, key) decides: a repeat returns the run the first call made.

    ``as_schedule`` makes it count as a run of that schedule of the job, under the
    schedule's concurrency policy: refused (409) under ``forbid`` while one of its runs
    is active, replacing the active one under ``replace``.
    """
    with unit_of_work(store) as work:
        # read: the job, and whether the tenant may use the pool and class asked for
        job = store.jobs.get_within(work.connection, tenant_id, job_id)
        check_usable(work.connection, tenant_id, {"pool": overrides.pool})
        if overrides.priority is not None:
            check_allowed(overrides.priority, max_priority(work.connection, tenant_id))
        # decide, then fold: a debounce's waiting run may stand for it
        request = RunRequest(job_id, overrides, idempotency_key)
        new = new_run(work.now, tenant_id, job, request, actor, as_schedule)
        folded = debounced(work.connection, [new], work.now, actor)
        joined = folded.joined.get(new.id)
        if joined is None:  # apply: under its limits (409 where ``drop`` makes none)
            limited = by_limits(work.connection, [folded.new_runs[0]], work.now)
            refusal = limited.refusal(new.id)
            if refusal is not None:
                raise refusal
            new = limited.new_runs[0]
            changes = queue(limited.new_runs) + limited.changes
            if as_schedule is not None:
                changes += _admit(work, tenant_id, job.id, as_schedule)
            inserted = new.id in work.apply(changes).inserted
    # answer: the new run, the debounce's, or the one the key made before
    if joined is not None:
        return store.runs.get(tenant_id, joined), False
    if inserted:
        return Run.model_validate(new_run_row(new, work.now, stored_spec=new.spec)), True
    existing = store.runs.by_idempotency_key(tenant_id, idempotency_key)
    if existing.job_id != job_id:
        raise key_reused(idempotency_key, existing.id, existing.job_id)
    return existing, False


def submit_many(
    store: Store, tenant_id: str, requests: Sequence[RunRequest], *, actor: str = "user"
) -> list[Submitted]:
    """Many one-off runs in one unit of work: one read of their jobs, one insert, one
    notice. Each request stands alone — an unknown job or a reused key is its own
    answer and never holds back the others — and keys repeat as in ``submit``, within
    the batch too (the second of two equal keys answers with the first's run)."""
    with unit_of_work(store) as work:
        return submit_within(store, work, tenant_id, requests, actor=actor)


def submit_within(
    store: Store,
    work: Work,
    tenant_id: str,
    requests: Sequence[RunRequest],
    *,
    actor: str,
    jobs: Mapping[tuple[str, str], Job] | None = None,
) -> list[Submitted]:
    """``submit_many`` inside a caller's unit of work (an event's triggers start their
    runs in the transaction that records the event); ``jobs``: the requests' jobs by
    (tenant, id), when the caller read them already."""
    # read
    found = jobs or store.jobs.get_many_within(
        work.connection, {(tenant_id, request.job_id) for request in requests}
    )
    named = {one.overrides.pool for one in requests if one.overrides.pool is not None}
    usable = usable_pools(work.connection, tenant_id, named)
    allowed = max_priority(work.connection, tenant_id)
    # decide: each request's run, or its refusal
    new_runs = [
        new_or_refused(work.now, tenant_id, found.get((tenant_id, request.job_id)),
                       request, actor, usable, allowed)
        for request in requests
    ]  # fmt: skip
    # fold: debounces, then limits
    folded = debounced(
        work.connection, [new for new in new_runs if isinstance(new, NewRun)], work.now,
        actor,
    )  # fmt: skip
    limited = by_limits(work.connection, folded.new_runs, work.now)
    admitted = {new.id: new for new in limited.new_runs}
    new_runs = [
        new
        if not isinstance(new, NewRun) or new.id in folded.joined
        else limited.refusal(new.id) or admitted[new.id]
        for new in new_runs
    ]
    # apply
    queued = [new for new in new_runs if isinstance(new, NewRun) and new.id not in folded.joined]
    inserted = work.apply(queue(queued) + limited.changes).inserted
    # answer
    repeated = runs_by_key(
        work.connection,
        tenant_id,
        {new.idempotency_key for new in queued if new.id not in inserted},
    )
    return [
        Submitted(folded.joined[new.id], False)  # a debounce's waiting run stands for it
        if isinstance(new, NewRun) and new.id in folded.joined
        else submitted(request, new, inserted, repeated)
        for request, new in zip(requests, new_runs, strict=True)
    ]


def _admit(work: Work, tenant_id: str, job_id: str, schedule_id: str) -> Changes:
    """The schedule's concurrency policy, for a manual run that counts as its own."""
    schedule = owned_row(
        work.connection,
        schedules,
        tenant_id,
        schedule_id,
        "schedule",
        columns=[schedules.c.job_id, schedules.c.spec],
    )
    if schedule.job_id != job_id:
        raise Invalid(
            f"schedule {schedule_id} runs job {schedule.job_id}, not {job_id}",
            field="schedule_id",
        )
    policy = ConcurrencyPolicy(schedule.spec.get("concurrency_policy", "allow"))
    active = active_of_schedule(work.connection, schedule_id)
    admission = admit(schedule_id, policy, active, work.now)
    if admission.blocking is not None:
        blocking = admission.blocking.run
        raise forbidden(schedule_id, blocking.id, blocking.state)
    record_replaced(work, schedule_id, admission.replaced)
    return admission.changes
