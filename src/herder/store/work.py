"""The unit of work: one write transaction with one ``now`` read from the injected clock,
in which a lifecycle decision's facts are read (runs locked), its changes applied set-based,
and after whose commit its notices are delivered."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, or_, select

from herder.clock import Clock
from herder.domain.lifecycle.changes import Changes
from herder.domain.lifecycle.facts import Ending, RunFacts
from herder.domain.lifecycle.settle import Settled, settle
from herder.store.backfill_steps import advance_backfill
from herder.store.database import Database
from herder.store.dialect import Among
from herder.store.runs.facts import facts_of_attempts
from herder.store.runs.writes import Applied, apply_changes
from herder.store.schema import runs
from herder.store.workflows.progress import advance_run
from herder.telemetry import metrics


@dataclass(frozen=True)
class Work:
    database: Database
    connection: Connection
    now: datetime
    rng: random.Random
    after_commit: list[Callable[[], None]] = field(default_factory=list)  # metrics to count

    def apply(self, changes: Changes, *, facts: Mapping[str, RunFacts] | None = None) -> Applied:
        """Apply the changes; a workflow task run or a backfill's run that ended moves its
        workflow run or backfill on, in this same transaction. ``facts`` (the runs as the
        decision read them) say which those are without asking the database again."""
        applied = apply_changes(self.database, self.connection, self.now, changes)
        self.after_commit.append(
            lambda: metrics.runs_moved(self.now, changes.moves, applied.moved, facts or {})
        )
        ended = [
            m.run_id for m in changes.moves if m.target.is_terminal and m.run_id in applied.moved
        ]
        if ended:
            self._move_on(ended, facts or {})
        return applied

    def _move_on(self, ended_run_ids: list[str], facts: Mapping[str, RunFacts]) -> None:
        owners: list[Any] = [facts[run_id] for run_id in ended_run_ids if run_id in facts]
        unknown = [run_id for run_id in ended_run_ids if run_id not in facts]
        among = Among(self.connection.dialect.name, runs.c.id, "run_ids")
        owned = select(runs.c.workflow_run_id, runs.c.backfill_id).where(
            among.condition,
            or_(runs.c.workflow_run_id.is_not(None), runs.c.backfill_id.is_not(None)),
        )
        for batch in among.batches(unknown):  # many at once: a fan-out's cancel
            owners += self.connection.execute(owned, batch).all()
        for workflow_run_id in sorted({owner.workflow_run_id for owner in owners} - {None}):
            advance_run(self, workflow_run_id)
        for backfill_id in sorted({owner.backfill_id for owner in owners} - {None}):
            self.backfill_step(backfill_id)

    def backfill_step(self, backfill_id: str) -> None:
        """One of the backfill's runs ended (or it was created): its next runs start."""
        advance_backfill(self, backfill_id)

    def settle(self, endings: Sequence[Ending], actor: str) -> list[Settled]:
        """Decide and apply the ends of these attempts (see ``lifecycle.settle``)."""
        if not endings:
            return []
        runs, attempts = facts_of_attempts(
            self.connection, {e.attempt_id for e in endings}, self.now
        )
        changes, settled = settle(runs, attempts, endings, actor=actor, now=self.now, rng=self.rng)
        self.apply(changes, facts=runs)
        return settled


@contextmanager
def unit_of_work(database: Database, clock: Clock, rng: random.Random) -> Iterator[Work]:
    with database.write() as connection:
        work = Work(database, connection, clock.now(), rng)
        yield work
    for count in work.after_commit:
        count()
