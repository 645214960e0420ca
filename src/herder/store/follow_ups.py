"""What follows an end, as a worklist drained in the open (Nomad's follow-up evaluations, in
one transaction): ``Work.apply`` notes the owners it touched, and ``follow_up`` works
through them — read, decide, apply — until nothing is pending, each owner once a round.

A workflow task's run that ended moves its workflow run on, a backfill's run its backfill;
a running workflow run that ended frees its slot under ``max_active_runs`` and, if a
backfill made it, moves the backfill on. What a round's applies touch again (a run a walk
cancelled, a workflow run a backfill's step started that ended at once) is the next round:
no step runs inside another's.
"""

from __future__ import annotations

from sqlalchemy import select

from herder.store.backfill_steps import step_backfill
from herder.store.dialect import Among
from herder.store.schema import runs, workflow_runs
from herder.store.unit import FollowUps, Work
from herder.store.workflows.progress import advance_run
from herder.store.workflows.starts import admit_next


def follow_up(work: Work) -> None:
    """Drain the unit of work's worklist: a round a pass, until a round touches nothing."""
    while work.pending:
        round_ = work.take_pending()
        _owners_of_ended_runs(work, round_)
        for workflow_run_id in sorted(round_.workflow_runs):
            advance_run(work, workflow_run_id)
        for workflow_run_id in sorted(round_.ended_workflow_runs):
            row = work.connection.execute(
                select(workflow_runs.c.workflow_id, workflow_runs.c.backfill_id).where(
                    workflow_runs.c.id == workflow_run_id
                )
            ).one()
            admit_next(work, row.workflow_id)
            if row.backfill_id is not None:
                round_.backfills.add(row.backfill_id)
        for backfill_id in sorted(round_.backfills):
            step_backfill(work, backfill_id)


def _owners_of_ended_runs(work: Work, round_: FollowUps) -> None:
    """The workflow runs and backfills of ended runs the deciding read did not name: one
    query a batch (a fan-out's cancel ends many at once)."""
    if not round_.ended_runs:
        return
    among = Among(work.connection.dialect.name, runs.c.id, "run_ids")
    owned = select(runs.c.workflow_run_id, runs.c.backfill_id).where(among.condition)
    for batch in among.batches(sorted(round_.ended_runs)):
        for workflow_run_id, backfill_id in work.connection.execute(owned, batch):
            if workflow_run_id is not None:
                round_.workflow_runs.add(workflow_run_id)
            if backfill_id is not None:
                round_.backfills.add(backfill_id)
