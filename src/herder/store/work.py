"""The unit of work: one write transaction with one ``now`` read from the injected clock,
in which a lifecycle decision's facts are read (runs locked), its changes applied set-based,
and after whose commit its notices are delivered."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from herder.clock import Clock
from herder.domain.lifecycle.changes import Changes
from herder.domain.lifecycle.facts import Ending
from herder.domain.lifecycle.settle import Settled, settle
from herder.store.database import Database
from herder.store.runs.facts import facts_of_attempts
from herder.store.runs.writes import Applied, apply_changes
from herder.store.workflows.progress import advance_after


@dataclass(frozen=True)
class Work:
    database: Database
    connection: Connection
    now: datetime
    rng: random.Random

    def apply(self, changes: Changes) -> Applied:
        """Apply the changes; a workflow task run that ended moves its workflow run on, in
        this same transaction."""
        applied = apply_changes(self.database, self.connection, self.now, changes)
        ended = [
            m.run_id for m in changes.moves if m.target.is_terminal and m.run_id in applied.moved
        ]
        if ended:
            advance_after(self, ended)
        return applied

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
