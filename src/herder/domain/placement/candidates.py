"""The workers one shape of run (a need and labels) may go to, kept for a pass.

Capacity only shrinks within a pass, and a worker reserved for a run stays held for the rest
of it (the run that reserved it is not considered again), so a worker a shape does not fit
now it never fits later in the pass. Each shape keeps its candidates in fleet order, a cursor
past those already looked at, and the window ranking chooses from — the first
``SCORED_WORKERS`` that fit, with their rank. A run re-ranks only the window's workers that
changed since (``WorkerRoom.version``) and reads further down the list only to refill the
window: the choice is ``ranking.best`` of the first ``SCORED_WORKERS`` that fit, without
scanning and scoring them all again for every run.
"""

from __future__ import annotations

import itertools
from operator import itemgetter

from herder.domain.placement.feasibility import fits_now
from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.ranking import SCORED_WORKERS, rank
from herder.domain.placement.resources import Amount


class Candidates:
    def __init__(self, workers: list[WorkerRoom], need: Amount) -> None:
        self.workers = workers  # accepting, with the labels, big enough: in fleet order
        self.need = need
        self._next = 0  # the workers before it are in the window or never fit again
        self._window: dict[str, tuple[int, tuple[float, str], WorkerRoom]] = {}  # by id

    def best(self, run_id: str) -> WorkerRoom | None:
        """The best fit for one member of ``run_id`` now, if any."""
        self._refresh(run_id)
        if not self._window:
            return None
        return min(self._window.values(), key=itemgetter(1))[2]

    def fitting(self, run_id: str, count: int) -> list[WorkerRoom]:
        """The first ``count`` that fit a member of ``run_id`` now, in fleet order (a gang
        of ``n`` members ranks from the first ``SCORED_WORKERS + n - 1``)."""
        self._refresh(run_id)
        found = [worker for _, _, worker in self._window.values()]  # in fleet order
        for worker in itertools.islice(self.workers, self._next, None):
            if len(found) >= count:
                break
            if fits_now(worker, self.need, run_id):
                found.append(worker)
        return found[:count]

    def _refresh(self, run_id: str) -> None:
        """Re-rank the window's workers that changed, drop those that no longer fit, and
        refill it from the workers not looked at yet."""
        need = self.need
        for worker_id, (version, _, worker) in list(self._window.items()):
            if worker.version == version:
                continue
            if fits_now(worker, need, run_id):
                self._window[worker_id] = (worker.version, rank(worker, need), worker)
            else:
                del self._window[worker_id]
        while len(self._window) < SCORED_WORKERS and self._next < len(self.workers):
            worker = self.workers[self._next]
            self._next += 1
            if fits_now(worker, need, run_id):
                self._window[worker.id] = (worker.version, rank(worker, need), worker)
