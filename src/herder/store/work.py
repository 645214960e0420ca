"""Opening a unit of work (``store.unit.Work``): one write transaction, one ``now``; what
its applies left to follow is drained (``store.follow_ups``) before it commits, and its
metrics are counted after. A use case that reads what followed drains first itself."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from herder.clock import Clock
from herder.store.database import Database
from herder.store.follow_ups import follow_up
from herder.store.unit import Work

__all__ = ["Work", "unit_of_work"]


@contextmanager
def unit_of_work(database: Database, clock: Clock, rng: random.Random) -> Iterator[Work]:
    with database.write() as connection:
        work = Work(database, connection, clock.now(), rng)
        yield work
        follow_up(work)
    for count in work.after_commit:
        count()
