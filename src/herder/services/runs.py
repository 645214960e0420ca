"""Runs a user starts, cancels, suspends, resumes and re-runs (each recorded as done by the
caller's key), and their history, detail and events."""

from __future__ import annotations

from collections.abc import Sequence

from herder.domain.actors import user_actor
from herder.domain.jobs import Priority
from herder.domain.listings import RunQuery
from herder.domain.models import Page, Principal, Run, RunDetail, RunEvent
from herder.domain.overrides import RunOverrides, RunRequest
from herder.store.runs.submissions import Submitted
from herder.store.store import Store


def actor(caller: Principal) -> str:
    """Who a run's events name as having done it."""
    return user_actor(caller.key_id)


def submit(
    store: Store,
    caller: Principal,
    job_id: str,
    overrides: RunOverrides,
    *,
    idempotency_key: str | None,
    schedule_id: str | None,
) -> tuple[Run, bool]:
    """A one-off run of the job (counted as one of ``schedule_id``'s, under its concurrency
    policy, when given). The same idempotency key returns the same run: ``created`` False."""
    return store.runs.submit(
        caller.tenant_id,
        job_id,
        overrides,
        idempotency_key=idempotency_key,
        actor=actor(caller),
        as_schedule=schedule_id,
    )


def submit_many(store: Store, caller: Principal, requests: Sequence[RunRequest]) -> list[Submitted]:
    """Many one-off runs in one transaction; each request answered on its own."""
    return store.runs.submit_many(caller.tenant_id, requests, actor=actor(caller))


def cancel(store: Store, caller: Principal, run_id: str) -> Run:
    """Ends a queued run at once; a running one stays running until its worker stops it."""
    return store.runs.cancel(caller.tenant_id, run_id, actor=actor(caller))


def suspend(store: Store, caller: Principal, run_id: str) -> Run:
    """Holds a run not running yet at once; a running one is held once its workers stop it."""
    return store.runs.suspend(caller.tenant_id, run_id, actor=actor(caller))


def set_priority(store: Store, caller: Principal, run_id: str, priority: Priority) -> Run:
    """Another class for a run not started yet, within its tenant's ``max_priority``."""
    return store.runs.set_priority(caller.tenant_id, run_id, priority, actor=actor(caller))


def resume(store: Store, caller: Principal, run_id: str) -> Run:
    """Queues a suspended run again (held pending past its tenant's ``max_queued``)."""
    return store.runs.resume(caller.tenant_id, run_id, actor=actor(caller))


def list_runs(store: Store, tenant_id: str, query: RunQuery) -> Page[Run]:
    """Newest first; a window reaching before the hot window reads the cold tier too."""
    return store.runs.list(tenant_id, query)


def read(store: Store, tenant_id: str, run_id: str) -> RunDetail:
    """The run with its attempts, history and output."""
    return store.runs.detail(tenant_id, run_id)


def events(store: Store, tenant_id: str, run_id: str) -> list[RunEvent]:
    return store.runs.events(tenant_id, run_id)


def rerun(store: Store, caller: Principal, run_id: str) -> Run:
    """A new run of an ended run's spec, linked to it (``rerun_of``)."""
    return store.runs.rerun(caller.tenant_id, run_id, actor=actor(caller))
