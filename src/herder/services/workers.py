"""The worker protocol: a worker registers, then claims work, beats and reports with the
secret it was given. Workers never touch the database; each call is one unit of work: the
report's use case is ``herder.app.reports`` (routers reach it through here until the layer
rule admits ``herder.app``), the others are still the store's."""

from __future__ import annotations

from collections.abc import Sequence

from herder.app import claims, reports
from herder.domain.jobs import Capacity
from herder.domain.models import Assignment, Worker
from herder.protocol import Completion, Directives, HeldAttempt, OutputChunk, ReportResult
from herder.store.store import Store


def register(
    store: Store,
    token_id: str,
    *,
    name: str,
    capacity: Capacity,
    max_slots: int,
    labels: dict[str, str],
    version: str,
    address: str,
) -> tuple[Worker, str]:
    """The new worker and its secret (the only copy), for every later call."""
    return store.workers.register(
        token_id,
        name=name,
        capacity=capacity,
        max_slots=max_slots,
        labels=labels,
        version=version,
        address=address,
    )


def authenticate(store: Store, worker_id: str, secret: str) -> None:
    """Admit a call for ``worker_id`` only with the secret it was given."""
    store.access.authenticate_worker(worker_id, secret)


def heartbeat(
    store: Store,
    worker_id: str,
    running: Sequence[HeldAttempt],
    *,
    unreported_grace_seconds: float,
    finished: Sequence[HeldAttempt],
) -> Directives:
    """The worker is alive; what it must stop."""
    return store.workers.heartbeat(
        worker_id,
        running,
        unreported_grace_seconds=unreported_grace_seconds,
        finished=finished,
    )


def claim(
    store: Store,
    worker_id: str,
    max_runs: int,
    running: Sequence[HeldAttempt],
    *,
    look_for_news: bool,
) -> tuple[list[Assignment], Directives]:
    """What the dispatcher placed on the worker, and (when asked) what it must stop."""
    return claims.claim_with_directives(store, worker_id, max_runs, running, look_for_news)


def report(
    store: Store,
    worker_id: str,
    output: Sequence[OutputChunk],
    completions: Sequence[Completion],
) -> list[ReportResult]:
    """Output and completions; a result per completion and per refused attempt's output."""
    return reports.report(store, worker_id, output, completions)


def artifact(store: Store, worker_id: str, artifact_id: str) -> bytes:
    """The bytes, if a running attempt on this worker needs them."""
    return store.artifacts.read_for_worker(worker_id, artifact_id)
