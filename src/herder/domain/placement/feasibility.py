"""Feasibility checks, cheapest first: may this worker ever, and right now, take this need?"""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.resources import Amount


def has_labels(worker: WorkerRoom, requires: Mapping[str, str]) -> bool:
    labels = worker.view.labels
    return all(labels.get(key) == value for key, value in requires.items())


def could_ever_fit(worker: WorkerRoom, need: Amount) -> bool:
    """Big enough when empty: otherwise waiting for capacity would never help."""
    return need.fits_in(worker.view.capacity)


def held_for_another(worker: WorkerRoom, run_id: str) -> bool:
    """Reserved this pass for a run that has waited longer (or is preempting there)."""
    return worker.reserved_for is not None and worker.reserved_for != run_id


def fits_now(worker: WorkerRoom, need: Amount, run_id: str) -> bool:
    if held_for_another(worker, run_id):
        return False
    return worker.accepts_work and need.fits_in(worker.free)


def eligible(workers: list[WorkerRoom], requires: Mapping[str, str]) -> list[WorkerRoom]:
    """Accepting workers with the required labels."""
    if not requires:
        return [worker for worker in workers if worker.accepts_work]
    return [worker for worker in workers if worker.accepts_work and has_labels(worker, requires)]
