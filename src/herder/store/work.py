"""The unit of work: one write transaction with one ``now`` read from the injected clock,
in which a lifecycle decision's facts are read (runs locked), its changes applied set-based,
and after whose commit its notices are delivered. What follows an end (a workflow run or a
backfill moving on) is registered from above (``follow_ends_with``), never imported here."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from herder.clock import Clock
from herder.domain.lifecycle.changes import Changes, WorkflowRunMove
from herder.domain.lifecycle.facts import Ending, RunFacts
from herder.domain.lifecycle.settle import Settled, settle
from herder.store.database import Database
from herder.store.runs.facts import facts_of_attempts
from herder.store.runs.writes import Applied, apply_changes
from herder.telemetry import metrics


@dataclass(frozen=True)
class Ended:
    """What one ``Work.apply`` ended: runs (with the facts its decision read them as, which
    spare asking the database again what owns them) and workflow runs."""

    run_ids: tuple[str, ...]
    facts: Mapping[str, RunFacts]
    workflow_runs: tuple[WorkflowRunMove, ...]


FollowUp = Callable[["Work", Ended], None]
_FOLLOW_UPS: list[FollowUp] = []


def follow_ends_with(follow_up: FollowUp) -> None:
    """Register what follows an end, from a layer above the unit of work (``store.store``
    moves workflow runs and backfills on), so the unit of work imports none of it."""
    if follow_up not in _FOLLOW_UPS:
        _FOLLOW_UPS.append(follow_up)


@dataclass(frozen=True)
class Work:
    database: Database
    connection: Connection
    now: datetime
    rng: random.Random
    after_commit: list[Callable[[], None]] = field(default_factory=list)  # metrics to count
    # Owners (backfills) being moved on in this unit of work: a move of one asked from inside
    # its own (a run it started ended at once) is made again after it, never nested in it.
    moving: set[str] = field(default_factory=set)
    move_again: set[str] = field(default_factory=set)

    def apply(self, changes: Changes, *, facts: Mapping[str, RunFacts] | None = None) -> Applied:
        """Apply the changes; what they ended is handed to the registered follow-ups, in
        this same transaction (a workflow task's end moves its workflow run on). ``facts``
        (the runs as the decision read them) go with it."""
        applied = apply_changes(self.database, self.connection, self.now, changes)
        self.after_commit.append(
            lambda: metrics.runs_moved(self.now, changes.moves, applied.moved, facts or {})
        )
        ended = Ended(
            tuple(
                m.run_id
                for m in changes.moves
                if m.target.is_terminal and m.run_id in applied.moved
            ),
            facts or {},
            tuple(
                m
                for m in changes.workflow_run_moves
                if m.target.is_terminal and m.workflow_run_id in applied.workflow_runs_moved
            ),
        )
        if ended.run_ids or ended.workflow_runs:
            for follow_up in _FOLLOW_UPS:
                follow_up(self, ended)
        return applied

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
