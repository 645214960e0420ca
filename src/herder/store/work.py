"""Opening a unit of work (``store.unit.Work``): one write transaction, one ``now``, its
metrics counted after commit. It never drains the worklist its applies leave: that is the
use case's (``app.follow_ups``, through ``app.work``). A unit of work that would commit with
follow-ups pending raises ``FollowUpsPending`` and rolls back, so a forgotten drain fails
loudly instead of leaving a workflow run or backfill stuck."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from herder.clock import Clock
from herder.store.database import Database
from herder.store.unit import FollowUps, Work

__all__ = ["FollowUpsPending", "Work", "unit_of_work"]


class FollowUpsPending(RuntimeError):
    """A unit of work about to commit with its worklist not drained: a programming error
    (a use case that forgot ``follow_up``), not a user's."""

    def __init__(self, pending: FollowUps) -> None:
        named = ", ".join(
            f"{kind} {sorted(ids)}"
            for kind, ids in [
                ("workflow runs", pending.workflow_runs),
                ("backfills", pending.backfills),
                ("ended workflow runs", pending.ended_workflow_runs),
                ("ended runs", pending.ended_runs),
            ]
            if ids
        )
        super().__init__(f"a unit of work would commit with follow-ups pending: {named}")


@contextmanager
def unit_of_work(database: Database, clock: Clock, rng: random.Random) -> Iterator[Work]:
    with database.write() as connection:
        work = Work(database, connection, clock.now(), rng)
        yield work
        if work.pending:
            raise FollowUpsPending(work.pending)
    for count in work.after_commit:
        count()
