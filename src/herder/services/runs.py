"""Runs a user starts, cancels and re-runs; each recorded as done by the caller's key."""

from __future__ import annotations

from collections.abc import Sequence

from herder.domain.jobs import RunOverrides, RunRequest
from herder.domain.models import Principal, Run
from herder.store.runs.repository import Submitted
from herder.store.store import Store


def actor(caller: Principal) -> str:
    """Who a run's events name as having done it."""
    return f"user:{caller.key_id}"


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


def rerun(store: Store, caller: Principal, run_id: str) -> Run:
    """A new run of an ended run's spec, linked to it (``rerun_of``)."""
    return store.runs.rerun(caller.tenant_id, run_id, actor=actor(caller))
