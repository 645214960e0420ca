"""Applying the moves of what owns runs — workflow runs and backfills — from a decision's
``Changes``: the only updates of their rows' states, each guarded by the state it expects
(and a workflow run's repair token, when the move names one). A guard that no longer holds
changes nothing, and the caller is told which moves held."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, update

from herder.domain.lifecycle.changes import BackfillMove, WorkflowRunMove
from herder.store.schema import backfills, workflow_runs


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
