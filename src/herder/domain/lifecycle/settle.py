"""An attempt ended — its worker reported it, or the server found it lost, overdue or
stopped before delivery — and its run moves on.

The rules, each once: a worker's report ends only that worker's current attempt (anything
else is refused and recorded, but for the same report sent again: acknowledged); a stop
pending on the attempt decides how it ended (``stops``); a gang's run succeeds when every
member has, and the first member to end otherwise stops the others; the run then follows its
retry policy, preempted attempts not counting as tries.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from herder.domain.actors import worker_actor
from herder.domain.lifecycle.changes import (
    DUE,
    WORK,
    AttemptEnd,
    Changes,
    Event,
    Notice,
    NoticeKind,
    transition,
)
from herder.domain.lifecycle.facts import AttemptFacts, Ending, RunFacts
from herder.domain.lifecycle.stops import SUSPENDED_REASON, Stop, outcome_of, pending_stop
from herder.domain.retry import decide
from herder.domain.states import AttemptState, RunState

PREEMPTED_WAITING = "preempted; waiting to be placed again"
_ONLY_REPORTS_END = frozenset({AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.PREEMPTED})


class Receipt(StrEnum):
    APPLIED = "applied"
    STALE = "stale"  # not the current attempt (a zombie's report): nothing changed
    NOT_YOURS = "not_yours"  # no such attempt on the reporting worker


@dataclass(frozen=True)
class Settled:
    attempt_id: str
    receipt: Receipt
    detail: str


@dataclass
class _Board:
    """What the decision knows, kept current as it goes: two members of one gang ending in
    one batch must see each other end."""

    runs: dict[str, RunFacts]
    attempts: dict[str, AttemptFacts]

    def running_members(self, attempt: AttemptFacts) -> list[AttemptFacts]:
        return [
            member
            for member in self.attempts.values()
            if member.run_id == attempt.run_id
            and member.number == attempt.number
            and member.id != attempt.id
            and member.state is AttemptState.RUNNING
        ]


def settle(
    runs: Mapping[str, RunFacts],
    attempts: Mapping[str, AttemptFacts],
    endings: Sequence[Ending],
    *,
    actor: str,
    now: datetime,
    rng: random.Random,
) -> tuple[Changes, list[Settled]]:
    """Decide every ending in order. ``attempts`` holds each attempt an ending names and
    every member of those runs' current attempts; ``runs`` holds their runs."""
    board = _Board(dict(runs), dict(attempts))
    changes = Changes()
    settled = []
    for ending in endings:
        part, result = _settle_one(board, ending, actor, now, rng)
        changes += part
        settled.append(result)
    return changes, settled


def refusal(
    attempt: AttemptFacts | None, worker_id: str, attempt_id: str, number: int, what: str
) -> tuple[Changes, Settled]:
    """A worker's word about an attempt that is not its current one: nothing changes, and
    the run's history says so (unless the attempt is not the worker's at all)."""
    if attempt is None or attempt.worker_id != worker_id:
        return Changes(), Settled(
            attempt_id, Receipt.NOT_YOURS, f"attempt {attempt_id} is not this worker's"
        )
    if attempt.number != number:
        why = f"attempt {attempt_id} is number {attempt.number}, not {number}"
    else:
        why = f"attempt {number} is already {attempt.state}"
    message = f"refused a late {what} from worker {worker_id}: {why}"
    event = Event(attempt.run_id, message, worker_actor(worker_id), attempt=number)
    return Changes(events=(event,)), Settled(attempt_id, Receipt.STALE, message)


def is_repeat(attempt: AttemptFacts, ending: Ending) -> bool:
    """A worker's report of an end already applied, sent again because its answer was lost
    (the server died after the commit): the attempt is that worker's, at that number, and
    ended as the report says (``preempted`` where a stop was pending), by an end only a report
    gives. ``lost``, ``timed_out`` and ``cancelled`` the server also finds by itself (a
    frozen worker, a deadline, a gang's member stopped): a report of one of those after the
    fact may be a zombie's, and is refused."""
    return (
        attempt.worker_id == ending.worker_id
        and attempt.number == ending.attempt
        and attempt.state in _ONLY_REPORTS_END
        and attempt.state in {ending.outcome, outcome_of(ending.outcome, Stop.PREEMPT)}
    )


def is_current(attempt: AttemptFacts | None, worker_id: str, number: int) -> bool:
    """The fence: this worker's attempt, at this number, still running."""
    return (
        attempt is not None
        and attempt.worker_id == worker_id
        and attempt.number == number
        and attempt.state is AttemptState.RUNNING
    )


def _settle_one(
    board: _Board, ending: Ending, actor: str, now: datetime, rng: random.Random
) -> tuple[Changes, Settled]:
    attempt = board.attempts.get(ending.attempt_id)
    if attempt is not None and ending.worker_id is not None and is_repeat(attempt, ending):
        detail = f"already applied: attempt {attempt.number} ended {attempt.state}"
        return Changes(), Settled(ending.attempt_id, Receipt.APPLIED, detail)
    if ending.worker_id is not None and not is_current(attempt, ending.worker_id, ending.attempt):
        what = f"{ending.outcome} report"
        return refusal(attempt, ending.worker_id, ending.attempt_id, ending.attempt, what)
    if attempt is None or attempt.state is not AttemptState.RUNNING:
        return Changes(), Settled(ending.attempt_id, Receipt.STALE, "already ended")
    run = board.runs[attempt.run_id]
    stop = pending_stop(
        run.cancel_requested, attempt.preempt_requested, suspend_requested=run.suspend_requested
    )
    outcome = outcome_of(ending.outcome, stop)
    suspended = stop is Stop.SUSPEND and outcome is AttemptState.PREEMPTED
    if suspended and not ending.reason.startswith(SUSPENDED_REASON):  # its worker saw a preempt
        ending = replace(ending, reason=SUSPENDED_REASON)
    preempted = stop is Stop.PREEMPT and outcome is AttemptState.PREEMPTED
    if preempted and ending.worker_id is not None and attempt.preempt_reason:
        ending = replace(ending, reason=attempt.preempt_reason)  # its worker cannot know why
    board.attempts[attempt.id] = attempt.ended(outcome)
    changes = Changes(
        attempt_ends=(
            AttemptEnd(
                attempt.id, outcome, ending.reason, ending.exit_code, ending.cpu_user_seconds,
                ending.cpu_system_seconds, ending.max_rss_kb, ending.stopped_by,
                ending.checkpoint_refused,
            ),
        ),
        notices=frozenset({Notice(NoticeKind.CAPACITY, attempt.worker_id)}),
    )  # fmt: skip
    if run.state is not RunState.RUNNING or run.attempt != attempt.number:
        return changes, Settled(attempt.id, Receipt.APPLIED, f"run is {run.state}")
    if run.replicas > 1:
        if outcome is AttemptState.SUCCEEDED and board.running_members(attempt):
            return changes, Settled(attempt.id, Receipt.APPLIED, f"run is {run.state}")
        if outcome is not AttemptState.SUCCEEDED:
            changes += _stop_gang(board, attempt, f"{outcome}: {ending.reason}")
    if suspended:
        move = _suspended(run, ending, actor, now)
    else:
        move = _after_attempt(run, outcome, ending, actor, now, rng)
    target = move.moves[0].target
    board.runs[run.id] = run.at(target)
    return changes + move, Settled(attempt.id, Receipt.APPLIED, f"run is {target}")


def _stop_gang(board: _Board, ended: AttemptFacts, why: str) -> Changes:
    """A gang member ended badly: the others' attempts end too; their workers kill them."""
    others = board.running_members(ended)
    for member in others:
        board.attempts[member.id] = member.ended(AttemptState.CANCELLED)
    reason = f"stopped with its gang: a member {why}"
    return Changes(
        attempt_ends=tuple(AttemptEnd(m.id, AttemptState.CANCELLED, reason) for m in others),
        notices=_to_workers((NoticeKind.CANCEL, NoticeKind.CAPACITY), others),
    )


def _after_attempt(
    run: RunFacts,
    outcome: AttemptState,
    ending: Ending,
    actor: str,
    now: datetime,
    rng: random.Random,
) -> Changes:
    """The run's next state per its retry policy once its current attempt has ended; a run
    that succeeds keeps the output of the attempt (for a gang, of the member that ended
    last)."""
    reason, exit_code = ending.reason, ending.exit_code
    decision = decide(outcome, reason, run.attempt, run.retry, rng, exit_code, tries=run.tries)
    values: dict[str, object] = {"exit_code": exit_code, "reason": reason}
    notices: set[Notice] = set()
    if decision.state is RunState.SUCCEEDED:
        values["output"] = ending.output
    if decision.state in (RunState.QUEUED, RunState.RETRY_WAIT):
        values["cancel_requested"] = False
    if run.suspend_requested:  # it ended by itself (or was cancelled) before the stop took
        values["suspend_requested"] = False
    if outcome is AttemptState.PREEMPTED:
        values.update(
            preemptions=run.preemptions + 1, preempted_at=now, waiting_reason=PREEMPTED_WAITING
        )
    if decision.state is RunState.QUEUED:
        notices.add(WORK)
        if outcome is AttemptState.PREEMPTED and run.queued_at is not None:
            values["queued_at"] = run.queued_at  # not its fault: it keeps its place
    if decision.retry_in_seconds is not None:
        values["retry_at"] = now + timedelta(seconds=decision.retry_in_seconds)
        notices.add(DUE)
    move = transition(
        run.id, RunState.RUNNING, decision.state, now,
        actor=actor, message=decision.message, attempt=run.attempt, **values,
    )  # fmt: skip
    return Changes(moves=(move,), notices=frozenset(notices))


def _suspended(run: RunFacts, ending: Ending, actor: str, now: datetime) -> Changes:
    """A suspend stopped the attempt: the run is held, using up no try (as a preemption),
    until someone resumes it; the next attempt restores its checkpoint. Its start deadline
    goes, as for a run held before it started (``suspend``)."""
    move = transition(
        run.id, RunState.RUNNING, RunState.SUSPENDED, now, actor=actor, attempt=run.attempt,
        message=f"attempt {run.attempt} stopped: {SUSPENDED_REASON}", reason=SUSPENDED_REASON,
        exit_code=ending.exit_code, suspend_requested=False, suspensions=run.suspensions + 1,
        start_deadline=None,
    )  # fmt: skip
    return Changes(moves=(move,))


def fail_unreadable(
    run: RunFacts,
    members: Sequence[AttemptFacts],
    reason: str,
    *,
    claimer: str,
    now: datetime,
) -> Changes:
    """A stored run whose spec no longer validates (a server bug): its attempt fails, every
    member with it, and the run ends ``failed`` with no retry — the same row would fail
    again. Members already handed to other workers are stopped there."""
    running = [member for member in members if member.state is AttemptState.RUNNING]
    others = [member for member in running if member.worker_id != claimer]
    move = transition(
        run.id, RunState.RUNNING, RunState.FAILED, now, actor=worker_actor(claimer),
        attempt=run.attempt, message=f"attempt {run.attempt} failed: {reason}", reason=reason,
        exit_code=None,
    )  # fmt: skip
    return Changes(
        attempt_ends=tuple(AttemptEnd(m.id, AttemptState.FAILED, reason) for m in running),
        moves=(move,),
        notices=_to_workers((NoticeKind.CAPACITY,), running)
        | _to_workers((NoticeKind.CANCEL,), others),
    )


def _to_workers(kinds: Iterable[NoticeKind], attempts: Iterable[AttemptFacts]) -> frozenset[Notice]:
    workers = {attempt.worker_id for attempt in attempts}
    return frozenset(Notice(kind, worker) for kind in kinds for worker in workers)
