"""A report's hand-off: the runs the report's own transaction queued (a workflow's next tasks)
placed on the worker that reported, and handed over in the reply, so a chain's next link
starts without waiting for a dispatcher's pass and the worker's next claim.

Only when the dispatcher would decide the same: the worker asked for room, the report queued
no more runs than that room (a wider fan-out is the dispatcher's to spread), nothing else is
queued, and the runs are of the shared fleet with no limit key and no in-use quota (what the
worker's own view cannot judge is left to the dispatcher). The policy decides on a snapshot
of that one worker, read under its lock, taken without waiting (``HandOffRepository.hold``);
placing takes from the room that read measured (``domain.placement.policy``).
"""

from __future__ import annotations

from herder.domain.models import Assignment
from herder.domain.placement.policy import plan
from herder.store.store import Store
from herder.store.unit import Work


def hand_off(store: Store, work: Work, worker_id: str, room: int) -> list[Assignment]:
    """What ``work`` queued that fits on the worker now, placed and handed over with what
    else was placed there and not yet handed over, up to ``room`` attempts."""
    if room <= 0 or not work.queued or len(work.queued) > room:
        return []
    held = store.hand_offs.hold(work, worker_id, work.queued)
    if held is None:
        return []
    decided = plan(held.snapshot)  # its preemptions and reasons are the dispatcher's to make
    placed = store.hand_offs.place(work, held, decided.placements)
    if not placed:
        return []
    if len(placed) == len(work.queued):  # and nothing else was queued: no pass to wake for
        store.hand_offs.nothing_left_to_place(work, worker_id)
    return store.workers.hand_over(work, worker_id, room)
