"""What the reaper finds due: workers silent too long, attempts past their deadline, retries
whose back-off has passed, queued runs past their start deadline."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from herder.domain.actors import worker_actor
from herder.domain.lifecycle.changes import WORK, Changes, Event, NoticeKind, notices, transition
from herder.domain.lifecycle.facts import AttemptFacts, DueRetry, Ending, WorkerSilence
from herder.domain.states import AttemptState, RunState

REAPER = "reaper"


def silent_workers(
    workers: Sequence[WorkerSilence], now: datetime, timeout: float, watching_since: datetime
) -> list[str]:
    """Workers silent past the timeout. Silence is judged only over time the caller has
    watched: after a restart, workers that could not reach a stopped server get a full
    timeout to return."""
    silent_since = now - timedelta(seconds=timeout)
    if watching_since > silent_since:
        return []
    return [worker.id for worker in workers if worker.last_heartbeat_at < silent_since]


def lost_with_worker(attempts: Sequence[AttemptFacts], timeout: float) -> list[Ending]:
    return [
        _ending(a, AttemptState.LOST, f"worker {a.worker_id} stopped heartbeating for over "
                f"{timeout:g}s")
        for a in attempts
    ]  # fmt: skip


def replaced_worker(attempts: Sequence[AttemptFacts]) -> list[Ending]:
    """Attempts of a worker known to be gone before it fell silent long enough to be judged
    so: the embedded worker of an earlier ``herder up`` of the same home."""
    why = "its worker is gone: herder up started again with a new local worker"
    return [_ending(attempt, AttemptState.LOST, why) for attempt in attempts]


def shut_down(attempts: Sequence[AttemptFacts], reason: str) -> list[Ending]:
    """Attempts of ``herder up``'s own worker that its report did not end as ``herder up``
    stopped (never delivered, or the report did not arrive): the whole system stopped on
    purpose, so they end ``cancelled`` with ``reason``, not lost."""
    return [_ending(attempt, AttemptState.CANCELLED, reason) for attempt in attempts]


def overdue(attempts: Sequence[AttemptFacts]) -> list[Ending]:
    """Attempts past their deadline whose worker never ended them (it may be gone, or
    stuck): ``timed_out`` here, whatever the worker says later."""
    why = "timed out: its worker did not end it by its deadline"
    return [_ending(attempt, AttemptState.TIMED_OUT, why) for attempt in attempts]


def never_delivered(attempts: Sequence[AttemptFacts]) -> Changes:
    """Attempts a claim handed over whose worker, well past the handover, lists them neither
    as running nor as finished: the claim's answer was lost (say the server died mid-claim).
    Their jobs never started, so no try is used and nothing is placed anew: the worker's next
    claim hands the same attempts over again."""
    return Changes(
        handovers_lost=tuple(attempt.id for attempt in attempts),
        events=tuple(
            Event(
                attempt.run_id,
                "the claim's answer never reached the worker: handed over again",
                worker_actor(attempt.worker_id),
                attempt=attempt.number,
            )
            for attempt in attempts
        ),
        notices=notices(NoticeKind.ASSIGNED, {attempt.worker_id for attempt in attempts}),
    )


def _ending(attempt: AttemptFacts, outcome: AttemptState, reason: str) -> Ending:
    """The server's finding: no worker fence (its worker cannot or did not end it)."""
    return Ending(attempt.id, attempt.number, outcome, reason)


def requeue_due(due: Sequence[DueRetry], now: datetime) -> Changes:
    """Runs whose retry is due go back to the queue: behind what queued meanwhile, except a
    run whose attempt was lost (its worker died, not its job), which keeps its place."""
    moves = tuple(
        transition(
            retry.run_id,
            RunState.RETRY_WAIT,
            RunState.QUEUED,
            now,
            actor=REAPER,
            message="retry due: queued again in its place (its worker was lost)"
            if retry.worker_lost
            else "retry due: queued again",
            retry_at=None,
            queued_at=retry.queued_at if retry.worker_lost else now,
        )
        for retry in due
    )
    return Changes(moves=moves, notices=frozenset({WORK}) if moves else frozenset())


def expire(expiring: Sequence[tuple[str, RunState]], now: datetime) -> Changes:
    """Runs not started by their start deadline: queued, or still held past their tenant's
    ``max_queued`` (``(run id, state)`` each)."""
    return Changes(
        moves=tuple(
            transition(
                run_id,
                state,
                RunState.EXPIRED,
                now,
                actor=REAPER,
                message="not started by its start deadline",
                reason="expired: not started by its start deadline",
                waiting_reason=None,
            )
            for run_id, state in expiring
        )
    )
