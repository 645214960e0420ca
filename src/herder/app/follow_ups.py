"""What follows an end, as a worklist drained in the open (Nomad's follow-up evaluations, in
one transaction): ``Work.apply`` notes the owners it touched (a store write that starts,
resumes or cancels a workflow run notes it too, ``Work.follow``), and ``follow_up`` works
through them — read, decide, apply — until nothing is pending, each owner once a round.

A workflow task's run that ended moves its workflow run on (``advance_run``), a backfill's
run its backfill (``step_backfill``); a running workflow run that ended frees its slot under
``max_active_runs`` (``admit_next``) and, if a backfill made it, moves the backfill on. What
a round's applies touch again (a run a walk cancelled, a workflow run admitted or started by
a backfill's step) is the next round: no step runs inside another's. The store keeps what
each reads and writes; it never calls back here.
"""

from __future__ import annotations

from herder.clock import epoch_ms
from herder.domain.backfills import (
    BackfillFacts,
    first_tally,
    refused_at,
    step,
    still_to_start,
    tallied,
)
from herder.domain.cron import fires_between
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.domain.queue_room import RELEASER
from herder.domain.workflows.admission import admit
from herder.domain.workflows.walk import walk
from herder.store.backfill_steps import active_of, backfill_to_step, compiled, start_times
from herder.store.queue_room import ReadQuotas, release_held
from herder.store.runs.facts import owners_of
from herder.store.unit import FollowUps, Work
from herder.store.workflows.progress import lock, read_walk
from herder.store.workflows.starts import admission_facts, backfill_of
from herder.store.workflows.waits import record_event_waits
from herder.telemetry import traces


def follow_up(work: Work) -> None:
    """Drain the unit of work's worklist: a round a pass, until a round touches nothing."""
    while work.pending:
        round_ = work.take_pending()
        _owners_of_ended_runs(work, round_)
        for workflow_run_id in sorted(round_.workflow_runs):
            advance_run(work, workflow_run_id)
        for workflow_run_id in sorted(round_.ended_workflow_runs):
            workflow_id, backfill_id = backfill_of(work.connection, workflow_run_id)
            admit_next(work, workflow_id)
            if backfill_id is not None:
                round_.backfills.add(backfill_id)
        for backfill_id in sorted(round_.backfills):
            step_backfill(work, backfill_id)


def advance_run(work: Work, workflow_run_id: str) -> None:
    """Decide the workflow run's pending tasks and apply the decision; end it when every
    task has ended. Its tenant's held runs are released first, as room frees."""
    row = lock(work.connection, workflow_run_id)
    if row is None:
        return
    room = release_held(work, row.tenant_id, actor=RELEASER, read=ReadQuotas(row.tenant_quotas))
    facts = read_walk(work, row, room)
    if facts is None:
        return
    changes = walk(facts, work.now, lambda: new_id("run", epoch_ms(work.now)))
    if not changes.empty:
        applied = work.apply(changes)
        record_event_waits(work, facts.dag, changes.new_runs, applied.inserted)


def admit_next(work: Work, workflow_id: str) -> None:
    """Start the workflow's oldest queued runs that ``max_active_runs`` leaves a slot for
    (``domain.workflows.admission``); their first tasks start in the next round."""
    facts = admission_facts(work.connection, workflow_id)
    if facts is None:
        return
    started = work.apply(admit(facts.capacity, facts.holding, facts.queued, work.now))
    for workflow_run_id in started.workflow_runs_moved:
        work.follow(workflow_run=workflow_run_id)


def step_backfill(work: Work, backfill_id: str) -> None:
    """Start the backfill's next nominal times while fewer than ``max_active`` of its runs
    are active; finish it once the range is done and none is active. Which times are
    already run is the unique key's answer (schedule, nominal time): each time is tried,
    and a repeat makes nothing."""
    found = backfill_to_step(work.connection, backfill_id)
    if found is None:
        return
    row, schedule = found
    room = release_held(work, row.tenant_id, actor=RELEASER)
    backfill = BackfillFacts(
        row.id, row.start, row.end, row.cursor, row.started, row.already_run, row.max_active,
        active_of(work.connection, row, schedule),
    )  # fmt: skip
    tally = first_tally(backfill)
    if schedule is None:
        tally = tallied(tally, [], 0)
    else:
        expression, zone, spec = compiled(schedule)
        while (wanted := still_to_start(backfill, tally)) > 0:
            nominals = fires_between(expression, zone, tally.cursor, backfill.end, wanted)
            try:
                made, room = start_times(work, row, schedule, spec, nominals, room)
            except Invalid:  # its job changed since: the schedule's overrides no longer fit it
                tally = refused_at(tally, nominals[0])
                break
            tally = tallied(tally, nominals, made)
    active_after = active_of(work.connection, row, schedule)
    work.apply(step(backfill, tally, active_after, work.now))


def _owners_of_ended_runs(work: Work, round_: FollowUps) -> None:
    """The workflow runs and backfills of ended runs the deciding read did not name: one
    query a batch (a fan-out's cancel ends many at once)."""
    if not round_.ended_runs:
        return
    owners = owners_of(work.connection, round_.ended_runs)
    for _, workflow_run_id, backfill_id in owners:
        if workflow_run_id is not None:
            round_.workflow_runs.add(workflow_run_id)
        if backfill_id is not None:
            round_.backfills.add(backfill_id)
    if work.ends_to_trace:  # tracing on: their spans, now that their workflow runs are known
        ended = [
            (run_id, workflow_run_id, work.ends_to_trace.pop(run_id))
            for run_id, workflow_run_id, _ in owners
            if run_id in work.ends_to_trace
        ]
        work.after_commit.append(lambda: traces.runs_ended(ended))
