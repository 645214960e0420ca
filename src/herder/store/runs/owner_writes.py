"""Applying what a decision's ``Changes`` make and move of what owns runs — workflow runs
and backfills: the only inserts of their rows (a workflow run's unique keys make a repeat
insert nothing) and the only updates of their states, each guarded by the state it expects
(and a workflow run's repair token, when the move names one). A guard that no longer holds
changes nothing, and the caller is told which inserts and moves held."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, insert, update

from herder.domain.backfill_states import BackfillState
from herder.domain.lifecycle.changes import (
    BackfillMove,
    NewBackfill,
    NewWorkflowRun,
    WorkflowRunMove,
)
from herder.domain.workflows.states import WorkflowRunState
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.schema import backfills, workflow_runs


def insert_workflow_runs(
    database: Database, connection: Connection, news: Sequence[NewWorkflowRun], now: datetime
) -> set[str]:
    """The ids of those inserted (a unique key already taken inserts nothing)."""
    inserted: set[str] = set()
    for new in news:
        statement = insert_ignoring_duplicates(
            database,
            workflow_runs,
            id=new.id,
            tenant_id=new.tenant_id,
            workflow_id=new.workflow_id,
            workflow_name=new.workflow_name,
            version=new.version,
            state=new.state,
            params=dict(new.params),
            jobs=dict(new.jobs),
            idempotency_key=new.idempotency_key,
            repair=0,
            cancel_requested=False,
            created_at=now,
            started_at=now if new.state is WorkflowRunState.RUNNING else None,
            schedule_id=new.schedule_id,
            scheduled_for=new.scheduled_for,
            backfill_id=new.backfill_id,
            deadline=None if new.deadline is None else dict(new.deadline),
            deadline_at=new.deadline_at,
            created_by=new.created_by,
        )
        if connection.execute(statement.returning(workflow_runs.c.id)).scalar() is not None:
            inserted.add(new.id)
    return inserted


def insert_backfills(connection: Connection, news: Sequence[NewBackfill], now: datetime) -> None:
    for new in news:
        connection.execute(
            insert(backfills).values(
                id=new.id,
                tenant_id=new.tenant_id,
                schedule_id=new.schedule_id,
                start=new.start,
                end=new.end,
                max_active=new.max_active,
                state=BackfillState.RUNNING,
                started=0,
                already_run=0,
                created_at=now,
            )
        )


def move_workflow_runs(connection: Connection, moves: Sequence[WorkflowRunMove]) -> set[str]:
    moved: set[str] = set()
    for move in moves:
        statement = update(workflow_runs).where(
            workflow_runs.c.id == move.workflow_run_id, workflow_runs.c.state == move.source
        )
        if move.at_repair is not None:
            statement = statement.where(workflow_runs.c.repair == move.at_repair)
        values = {"state": move.target, **move.values}
        if connection.execute(statement.values(values)).rowcount:
            moved.add(move.workflow_run_id)
    return moved


def move_backfills(connection: Connection, moves: Sequence[BackfillMove]) -> set[str]:
    moved: set[str] = set()
    for move in moves:
        statement = (
            update(backfills)
            .where(backfills.c.id == move.backfill_id, backfills.c.state == move.source)
            .values({"state": move.target, **move.values})
        )
        if connection.execute(statement).rowcount:
            moved.add(move.backfill_id)
    return moved
