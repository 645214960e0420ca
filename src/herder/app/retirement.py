"""A worker retired by ``herder up`` — known gone, not judged by its silence: as it stops its
local worker, and again as it starts (what a killed start left). One use case in one unit of
work: read the workers of the token and name, mark them lost, let the domain end their
attempts (``lifecycle.settle``), apply, follow up (the workflow runs and backfills of the runs
that ended move on), forget the workers."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.domain.lifecycle.facts import AttemptFacts, Ending
from herder.domain.lifecycle.reap import replaced_worker
from herder.store.runs.due import mark_lost
from herder.store.store import Store
from herder.store.workers import forget_workers, named_workers


def retire(
    store: Store,
    token_id: str,
    name: str,
    ending: Callable[[Sequence[AttemptFacts]], list[Ending]] = replaced_worker,
) -> list[str]:
    """The workers of this token and name are gone, so no run is placed on them meanwhile.
    The attempts of those not lost yet end as ``ending`` says (by default ``lost``, to retry
    as any lost attempt); then all are forgotten, so the fleet lists one local worker, not
    one more ghost each start. Returns the workers retired."""
    with unit_of_work(store) as work:
        gone = named_workers(work.connection, token_id, name)
        work.settle(ending(mark_lost(work, gone, None)), "herder up")
        follow_up(work)
        forget_workers(work.connection, gone)
    return gone
