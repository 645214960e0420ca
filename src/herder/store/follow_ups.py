"""What follows an end, registered on the unit of work by ``store.store`` (the unit of work
imports none of it): a workflow task's run that ended moves its workflow run on, a
backfill's run its backfill; a running workflow run that ended frees its slot under
``max_active_runs`` and, if a backfill made it, moves the backfill on."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select

from herder.domain.workflows.states import WorkflowRunState
from herder.store.backfill_steps import advance_backfill
from herder.store.dialect import Among
from herder.store.schema import runs, workflow_runs
from herder.store.work import Ended, Work
from herder.store.workflows.progress import advance_run
from herder.store.workflows.starts import admit_next


def move_owners_on(work: Work, ended: Ended) -> None:
    owners: list[Any] = [ended.facts[run_id] for run_id in ended.run_ids if run_id in ended.facts]
    unknown = [run_id for run_id in ended.run_ids if run_id not in ended.facts]
    among = Among(work.connection.dialect.name, runs.c.id, "run_ids")
    owned = select(runs.c.workflow_run_id, runs.c.backfill_id).where(
        among.condition,
        or_(runs.c.workflow_run_id.is_not(None), runs.c.backfill_id.is_not(None)),
    )
    for batch in among.batches(unknown):  # many at once: a fan-out's cancel
        owners += work.connection.execute(owned, batch).all()
    for workflow_run_id in sorted({owner.workflow_run_id for owner in owners} - {None}):
        advance_run(work, workflow_run_id)
    for backfill_id in sorted({owner.backfill_id for owner in owners} - {None}):
        advance_backfill(work, backfill_id)
    for move in ended.workflow_runs:
        if move.source is WorkflowRunState.RUNNING:
            _workflow_run_ended(work, move.workflow_run_id)


def _workflow_run_ended(work: Work, workflow_run_id: str) -> None:
    row = work.connection.execute(
        select(workflow_runs.c.workflow_id, workflow_runs.c.backfill_id).where(
            workflow_runs.c.id == workflow_run_id
        )
    ).one()
    admit_next(work, row.workflow_id)
    if row.backfill_id is not None:
        advance_backfill(work, row.backfill_id)
