"""The unit of work: one write transaction with one ``now`` read from the injected clock,
in which a lifecycle decision's facts are read (runs locked), its changes applied set-based,
and after whose commit its notices are delivered."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, or_, select

from herder.clock import Clock
from herder.domain.lifecycle.changes import Changes
from herder.domain.lifecycle.facts import Ending
from herder.domain.lifecycle.settle import Settled, settle
from herder.store.backfill_steps import advance_backfill
from herder.store.database import Database
from herder.store.runs.facts import facts_of_attempts
from herder.store.runs.writes import Applied, apply_changes
from herder.store.schema import runs
from herder.store.workflows.progress import advance_run


@dataclass(frozen=True)
class Work:
    database: Database
    connection: Connection
    now: datetime
    rng: random.Random

    def apply(self, changes: Changes) -> Applied:
        """Apply the changes; a workflow task run or a backfill's run that ended moves its
        workflow run or backfill on, in this same transaction."""
        applied = apply_changes(self.database, self.connection, self.now, changes)
        ended = [
            m.run_id for m in changes.moves if m.target.is_terminal and m.run_id in applied.moved
        ]
        if ended:
            self._move_on(ended)
        return applied

    def _move_on(self, ended_run_ids: list[str]) -> None:
        owners = self.connection.execute(
            select(runs.c.workflow_run_id, runs.c.backfill_id).where(
                runs.c.id.in_(ended_run_ids),
                or_(runs.c.workflow_run_id.is_not(None), runs.c.backfill_id.is_not(None)),
            )
        ).all()
        for workflow_run_id in sorted({row.workflow_run_id for row in owners} - {None}):
            advance_run(self, workflow_run_id)
        for backfill_id in sorted({row.backfill_id for row in owners} - {None}):
            self.backfill_step(backfill_id)

    def backfill_step(self, backfill_id: str) -> None:
        """One of the backfill's runs ended (or it was created): its next runs start."""
        advance_backfill(self, backfill_id)

    def settle(self, endings: Sequence[Ending], actor: str) -> list[Settled]:
        """Decide and apply the ends of these attempts (see ``lifecycle.settle``)."""
        if not endings:
            return []
        runs, attempts = facts_of_attempts(self.connection, {e.attempt_id for e in endings})
        changes, settled = settle(runs, attempts, endings, actor=actor, now=self.now, rng=self.rng)
        self.apply(changes)
        return settled


@contextmanager
def unit_of_work(database: Database, clock: Clock, rng: random.Random) -> Iterator[Work]:
    with database.write() as connection:
        yield Work(database, connection, clock.now(), rng)
