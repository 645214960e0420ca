"""What a submission makes before the unit of work applies it: each request's new run (its
spec with the overrides, its start deadline, its first event), the queueing of many at once,
and a batch's answer per request, an idempotency key's earlier run included."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, select

from herder.clock import epoch_ms
from herder.domain.deadlines import deadline_at
from herder.domain.errors import Conflict, HerderError, Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import Priority
from herder.domain.lifecycle.changes import DUE, WORK, Changes, Event, NewRun
from herder.domain.lifecycle.priority import check_allowed
from herder.domain.models import Job
from herder.domain.overrides import RunRequest, apply_overrides
from herder.domain.states import RunState
from herder.store.pools import not_usable
from herder.store.schema import runs

BEING_CREATED = "the run for this Idempotency-Key is being created; retry"


@dataclass(frozen=True)
class Submitted:
    """One request's answer in a batch submit: the run (new, or the one its key already
    made), or the error that refused this request alone."""

    run_id: str | None
    created: bool
    error: HerderError | None = None


def new_run(
    now: datetime,
    tenant_id: str,
    job: Job,
    request: RunRequest,
    actor: str,
    as_schedule: str | None = None,
) -> NewRun:
    """The run a request makes: queued, or ``scheduled`` until its later start (a start
    deadline and a deadline then count from that start)."""
    deadline = request.overrides.start_deadline_seconds
    run_id = new_id("run", epoch_ms(now))
    start = request.overrides.start_at(now)
    state = RunState.QUEUED if start is None else RunState.SCHEDULED
    message = (
        "submitted" if start is None else f"submitted to start at {start:%Y-%m-%d %H:%M:%S} UTC"
    )
    return NewRun(
        id=run_id, tenant_id=tenant_id, job_id=job.id, job_name=job.name,
        spec=apply_overrides(job.spec, request.overrides),
        idempotency_key=request.idempotency_key, schedule_id=as_schedule,
        start_deadline=None if deadline is None else (start or now) + timedelta(seconds=deadline),
        event=Event(run_id, message, actor, target=state), state=state, run_at=start,
        deadline_at=deadline_at(job.spec.deadline, start or now),
    )  # fmt: skip


def queue(new_runs: Sequence[NewRun]) -> Changes:
    """Insert the runs; the dispatcher hears of new work, the reaper of (start) deadlines and
    the starter of delayed runs."""
    if not new_runs:
        return Changes()
    later = any(
        new.start_deadline or new.deadline_at or new.state is RunState.SCHEDULED for new in new_runs
    )
    notices = {WORK} | ({DUE} if later else set())
    return Changes(new_runs=tuple(new_runs), notices=frozenset(notices))


def key_reused(
    key: str | None, run_id: str, job_id: str, field: str = "Idempotency-Key"
) -> Conflict:
    return Conflict(
        f"Idempotency-Key {key!r} was already used for run {run_id} of job {job_id}; use a "
        "new key for a different job",
        field=field,
    )


def runs_by_key(
    connection: Connection, tenant_id: str, keys: set[str | None]
) -> dict[str, tuple[str, str]]:
    """(run id, job id) of the tenant's runs made under these idempotency keys."""
    wanted = [key for key in keys if key is not None]
    if not wanted:
        return {}
    rows = connection.execute(
        select(runs.c.idempotency_key, runs.c.id, runs.c.job_id).where(
            runs.c.tenant_id == tenant_id, runs.c.idempotency_key.in_(wanted)
        )
    ).all()
    return {row.idempotency_key: (row.id, row.job_id) for row in rows}


def new_or_refused(
    now: datetime,
    tenant_id: str,
    job: Job | None,
    request: RunRequest,
    actor: str,
    usable: Collection[str],
    allowed: Priority | None = None,
) -> NewRun | HerderError:
    """A batch's run, or why this request alone is refused (its job is unknown; its
    overrides do not fit the job, name a pool the tenant may not use, not in ``usable``, or
    ask for a class above the tenant's ``allowed``)."""
    if job is None:
        return NotFound(f"job {request.job_id} not found", field="job_id")
    pool = request.overrides.pool
    if pool is not None and pool not in usable:
        return not_usable(pool, tenant_id, "pool")
    try:
        if request.overrides.priority is not None:
            check_allowed(request.overrides.priority, allowed)
        return new_run(now, tenant_id, job, request, actor)
    except Invalid as refused:
        return refused


def submitted(
    request: RunRequest,
    new: NewRun | HerderError,
    inserted: frozenset[str],
    repeated: dict[str, tuple[str, str]],
) -> Submitted:
    if isinstance(new, HerderError):
        return Submitted(None, False, new)
    if new.id in inserted:
        return Submitted(new.id, True)
    made = repeated.get(request.idempotency_key or "")
    if made is None:  # only if a concurrent insert under the key was rolled back
        return Submitted(None, False, Conflict(BEING_CREATED, field="idempotency_key"))
    run_id, job_id = made
    if job_id != request.job_id:
        conflict = key_reused(request.idempotency_key, run_id, job_id, "idempotency_key")
        return Submitted(None, False, conflict)
    return Submitted(run_id, False)
