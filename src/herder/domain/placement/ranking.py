"""Rankers: among the workers a run fits on now, which is best. Lower scores win.

Best fit: the worker left with the least free capacity (each resource as a fraction of the
worker's size) wins, so large holes stay open for large runs. A run that needs no GPU pays a
penalty on a GPU worker, so GPU machines stay free for GPU work.

Like Nomad's limit iterator, a run scores at most ``SCORED_WORKERS`` workers that fit it:
past a few dozen the best fit barely improves while the cost grows with the fleet.
"""

from __future__ import annotations

from collections.abc import Iterable

from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.resources import Amount

GPU_WORKER_PENALTY = 1.0  # as much as leaving a whole dimension empty
SCORED_WORKERS = 64


def score(worker: WorkerRoom, need: Amount, free: Amount | None = None) -> float:
    """Free capacity left after placing ``need`` on ``free`` (the worker's by default)."""
    capacity = worker.view.capacity
    room = worker.free if free is None else free
    left = 0.0
    if capacity.cpu_milli:
        left += (room.cpu_milli - need.cpu_milli) / capacity.cpu_milli
    if capacity.memory_mb:
        left += (room.memory_mb - need.memory_mb) / capacity.memory_mb
    if capacity.gpus:
        left += (room.gpus - need.gpus) / capacity.gpus
        if not need.gpus:
            left += GPU_WORKER_PENALTY
    return left


def rank(worker: WorkerRoom, need: Amount, free: Amount | None = None) -> tuple[float, str]:
    """Lower wins: the score, then the worker's id, so a tie always goes the same way."""
    return score(worker, need, free), worker.id


def best(
    workers: Iterable[WorkerRoom], need: Amount, free: dict[str, Amount] | None = None
) -> WorkerRoom | None:
    """The best of the first ``SCORED_WORKERS`` given (each already known to fit)."""
    chosen: WorkerRoom | None = None
    chosen_key = (0.0, "")
    for scored, worker in enumerate(workers):
        if scored == SCORED_WORKERS:
            break
        key = rank(worker, need, free[worker.id] if free else None)
        if chosen is None or key < chosen_key:
            chosen, chosen_key = worker, key
    return chosen
