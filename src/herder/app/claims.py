"""A worker's claim: the attempts the dispatcher placed on it handed over, in one unit of
work (``store.workers.hand_over``), and — when asked — which of its attempts to stop. A stored
run that cannot be handed over fails alone; its end is followed up (its workflow run or
backfill moves on) before the claim commits."""

from __future__ import annotations

from collections.abc import Sequence

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.domain.models import Assignment
from herder.protocol import Directives, HeldAttempt
from herder.store.store import Store


def claim(store: Store, worker_id: str, max_runs: int) -> list[Assignment]:
    """Up to ``max_runs`` attempts handed over to the worker."""
    if max_runs <= 0:
        return []
    with unit_of_work(store) as work:
        given = store.workers.hand_over(work, worker_id, max_runs)
        follow_up(work)  # the runs that failed at the handover move their owners on
    return given


def claim_with_directives(
    store: Store, worker_id: str, max_runs: int, running: Sequence[HeldAttempt], look_for_news: bool
) -> tuple[list[Assignment], Directives]:
    """Claim, and (when asked) look up which of the worker's attempts to stop or drop."""
    nothing = Directives(cancel=[], drop=[], preempt=[])
    directives = store.workers.directives(worker_id, running) if look_for_news else nothing
    return claim(store, worker_id, max_runs), directives
