"""The order in which queued runs are considered.

1. Priority class, high first. Waiting raises a run's class: every ``class_aging_seconds``
   it waits counts one class more (up to high), so low work is not starved by a constant
   stream of higher work.
2. Within a class, runs that have waited ``starvation_seconds`` go first, oldest first:
   they bypass fair share, and one that cannot start gets a worker reserved (policy.py).
3. Then the tenant with the lowest weighted dominant share (DRF) goes next, its oldest run
   first; shares are read again after every placement, so a tenant that just got capacity
   drops back. A run counted against a limit's key waits its key's turn (limits.turns):
   within a tenant's queue, by turn (its key's runs running or ahead of it, then the key's
   last start), then age, so the keys of a limit take turns.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from herder.domain.placement.limits import FIRST_TURN, Turn
from herder.domain.placement.snapshot import QueuedRun

HIGHEST_CLASS = 2


@dataclass(frozen=True)
class Aging:
    class_aging_seconds: float = 600.0
    starvation_seconds: float = 300.0


def wait_began(queued_at: datetime, preempted_at: datetime | None) -> datetime:
    """When a queued run's current wait began: a preempted run keeps its place in the queue
    (``queued_at``), but its wait starts again when it is preempted, or its running time
    would count as waiting — in its aging, the queue's waits and their alerts alike."""
    return max(queued_at, preempted_at or queued_at)


def waited(run: QueuedRun, now: datetime) -> float:
    """How long it has waited for its aging: a preempted run keeps its place but not its
    age, or the run it made room for would find it promoted ahead of itself."""
    return max(0.0, (now - wait_began(run.queued_at, run.preempted_at)).total_seconds())


def effective_class(run: QueuedRun, now: datetime, aging: Aging) -> int:
    promoted = int(waited(run, now) // aging.class_aging_seconds)
    return min(HIGHEST_CLASS, run.priority + promoted)


def is_starving(run: QueuedRun, now: datetime, aging: Aging) -> bool:
    return waited(run, now) >= aging.starvation_seconds


def dispatch_order(
    runs: list[QueuedRun],
    now: datetime,
    aging: Aging,
    share: Callable[[str], float],
    turns: Mapping[str, Turn] | None = None,
) -> Iterator[QueuedRun]:
    """Yield runs in the order to consider them; ``share(tenant)`` is asked afresh each time
    a tenant comes up, so placements made between yields count; ``turns`` (by run id; none:
    the first) order each tenant's queue before age."""
    classes: dict[int, list[QueuedRun]] = defaultdict(list)
    for run in runs:
        classes[effective_class(run, now, aging)].append(run)
    for level in sorted(classes, reverse=True):
        members = sorted(classes[level], key=lambda run: (run.queued_at, run.id))
        starving = [run for run in members if is_starving(run, now, aging)]
        yield from starving
        if turns:  # a stable sort: by age within a turn
            members.sort(key=lambda run: turns.get(run.id, FIRST_TURN))
        queues: dict[str, deque[QueuedRun]] = defaultdict(deque)
        for run in members:
            if not is_starving(run, now, aging):
                queues[run.tenant_id].append(run)
        yield from _fair_share(queues, share)


def _fair_share(
    queues: dict[str, deque[QueuedRun]], share: Callable[[str], float]
) -> Iterator[QueuedRun]:
    heap = [(share(tenant), queue[0].queued_at, tenant) for tenant, queue in queues.items()]
    heapq.heapify(heap)
    while heap:
        _, _, tenant = heapq.heappop(heap)
        queue = queues[tenant]
        yield queue.popleft()
        if queue:
            heapq.heappush(heap, (share(tenant), queue[0].queued_at, tenant))
