"""A use case's unit of work: the store's (one write transaction, one ``now``), its worklist
drained before it commits (``follow_ups.follow_up``). A use case that reads back what
followed drains first itself; the drain here catches what its last apply left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from herder.app.follow_ups import follow_up
from herder.store.store import Store
from herder.store.unit import Work


@contextmanager
def unit_of_work(store: Store) -> Iterator[Work]:
    with store.work() as work:
        yield work
        follow_up(work)
