"""What lifecycle decisions read: plain snapshots of rows, taken inside the unit of work
that applies the decision (the runs locked), so what they say still holds when it writes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from pydantic import JsonValue

from herder.domain.jobs import RetryPolicy
from herder.domain.states import AttemptState, RunState, StoppedBy


@dataclass(frozen=True)
class RunFacts:
    id: str
    state: RunState
    attempt: int  # the current attempt's number: the fencing token
    replicas: int = 1
    preemptions: int = 0
    cancel_requested: bool = False
    suspend_requested: bool = False
    suspensions: int = 0  # attempts stopped by a suspend: like preemptions, not tries
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    workflow_run_id: str | None = None  # a workflow task's run: its end moves that run on
    backfill_id: str | None = None  # a backfill's run: its end starts the next
    started_at: datetime | None = None  # when its current attempt was placed
    queued_at: datetime | None = None  # its place in the queue: kept while it runs

    def at(self, state: RunState) -> RunFacts:
        return replace(self, state=state)

    @property
    def tries(self) -> int:
        """Attempts that count against the retry policy: preempted and suspended ones are
        not tries."""
        return self.attempt - self.preemptions - self.suspensions


@dataclass(frozen=True)
class AttemptFacts:
    """One attempt row: for a gang, one per member (``rank``)."""

    id: str
    run_id: str
    number: int
    worker_id: str
    state: AttemptState = AttemptState.RUNNING
    preempt_requested: bool = False
    preempt_reason: str | None = None  # why the dispatcher stops it (placement.timeline)
    rank: int = 0

    def ended(self, state: AttemptState) -> AttemptFacts:
        return replace(self, state=state)


@dataclass(frozen=True)
class Ending:
    """An attempt's end as someone saw it: its worker's report, or the server's finding
    (worker lost, deadline passed, never delivered, stopped before delivery).

    ``worker_id`` fences a worker's report: only that worker's current attempt may end.
    ``output`` is what its job wrote to ``$HERDER_OUTPUT``, already checked
    (``domain.outputs``); kept on the run only if the attempt's end makes it succeed.
    """

    attempt_id: str
    attempt: int
    outcome: AttemptState
    reason: str
    exit_code: int | None = None
    worker_id: str | None = None
    cpu_user_seconds: float | None = None
    cpu_system_seconds: float | None = None
    max_rss_kb: int | None = None
    output: JsonValue = None
    stopped_by: StoppedBy | None = None  # the worker's signal that ended it, if it stopped it
    checkpoint_refused: str | None = None  # why its checkpoint was not saved at its end


@dataclass(frozen=True)
class WorkerSilence:
    id: str
    last_heartbeat_at: datetime


@dataclass(frozen=True)
class ActiveRun:
    """A run not yet ended, with the running members of its current attempt (whose workers
    must hear of a cancel)."""

    run: RunFacts
    members: tuple[AttemptFacts, ...] = ()


@dataclass(frozen=True)
class DueRetry:
    run_id: str
    queued_at: datetime  # when it first queued
    worker_lost: bool  # its last attempt was lost with its worker (not its job's fault)
