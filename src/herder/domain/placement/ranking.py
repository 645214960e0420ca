"""Rankers: among the workers a run fits on now, which is best. Lower scores win.

Best fit: the worker left with the least free capacity (each resource as a fraction of the
worker's size) wins, so large holes stay open for large runs. A run that needs no GPU pays a
penalty on a GPU worker, so GPU machines stay free for GPU work.
"""

from __future__ import annotations

from herder.domain.placement.fleet import WorkerState
from herder.domain.placement.resources import Amount

GPU_WORKER_PENALTY = 1.0  # as much as leaving a whole dimension empty


def leftover(worker: WorkerState, need: Amount) -> float:
    capacity = worker.view.capacity
    after = worker.free - need
    score = after.cpu_milli / capacity.cpu_milli if capacity.cpu_milli else 0.0
    score += after.memory_mb / capacity.memory_mb if capacity.memory_mb else 0.0
    score += after.gpus / capacity.gpus if capacity.gpus else 0.0
    return score


def gpu_hoarding(worker: WorkerState, need: Amount) -> float:
    return GPU_WORKER_PENALTY if need.gpus == 0 and worker.view.capacity.gpus > 0 else 0.0


def score(worker: WorkerState, need: Amount) -> tuple[float, str]:
    return leftover(worker, need) + gpu_hoarding(worker, need), worker.id


def best(workers: list[WorkerState], need: Amount) -> WorkerState | None:
    return min(workers, key=lambda worker: score(worker, need), default=None)
