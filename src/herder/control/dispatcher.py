"""The dispatcher: matches queued runs to worker capacity.

Each pass reads a snapshot, asks the pure policy (``herder.domain.placement``) for a plan,
applies it in one transaction (placements that no longer fit are skipped), and stores the
waiting reasons that changed. It wakes on notices — new work, freed capacity — and otherwise
every ``IDLE_SECONDS``, so aging, cool-downs and reasons stay current (and a lost notice
costs that much latency at most).

A pass woken by a notice is quick: it reads only as much of the queue as the free slots
could take. At least every ``FULL_PASS_SECONDS`` a full pass reads every tenant's head of the
queue, so fair share sees everyone and every queued run's reason stays current.

Passes are paced: the next starts no sooner than the last one took after it ended (a step
woken earlier returns at once with the time left), so under
a storm of notices the dispatcher uses at most about half a core and each pass takes a
bigger batch, while on a quiet system a run is still placed the moment it is submitted.

The fleet — the workers and the thousands of attempts they run — is kept between passes:
the attempts a pass starts are added to it as the store read them back, and only the
workers that changed otherwise are read again: those it preempted on, and those named by a
notice the store hears (capacity freed, a cancel). Every ``FLEET_REFRESH_SECONDS``, after a
placement the store skipped (another dispatcher's work, between two lease holders, shows
that way) and after a failed pass, the whole fleet is read again. The view cannot
over-commit a worker — the store re-checks room under the worker's lock — so a notice lost
costs at most a placement skipped or a run waiting until the next full read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from herder.domain.placement.partitions import Partition
from herder.domain.placement.policy import PlacementSettings, plan
from herder.domain.placement.snapshot import WorkerView, with_started
from herder.store.runs.placement import PlacementRepository
from herder.store.runs.snapshot import WHOLE
from herder.telemetry import traces

IDLE_SECONDS = 2.0
RETRY_SOON_SECONDS = 0.0  # a placement was skipped (a race): look again at once
MAX_PACING_SECONDS = 0.5
FULL_PASS_SECONDS = 2.0
FLEET_REFRESH_SECONDS = 10.0  # the whole fleet read again at least this often

log = logging.getLogger("herder.dispatcher")


class Dispatcher:
    def __init__(
        self,
        placement: PlacementRepository,
        settings: PlacementSettings | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        partition: Partition = WHOLE,
    ) -> None:
        """``partition``: the pools it places (``domain.placement.partitions``); its lease is
        ``dispatcher-N`` then, else ``dispatcher``."""
        self.name = "dispatcher" if partition.whole else f"dispatcher-{partition.number}"
        self._partition = partition
        self._placement = placement
        self._settings = settings or PlacementSettings()
        self._reasons: dict[str, tuple[datetime, str]] = {}  # as stored: only changes are written
        self._monotonic = monotonic
        self._next_pass_at = 0.0
        self._full_pass_at: float | None = None  # due now
        self._fleet: tuple[WorkerView, ...] | None = None  # as last read; None: read it all
        self._fleet_read_at = 0.0
        self._changed: set[str] = set()  # workers to read again: notices, own preemptions
        self._changed_lock = threading.Lock()  # notices arrive on other threads
        placement.on_worker_notice(self.worker_changed)

    def worker_changed(self, worker_id: str) -> None:
        """Something about the worker changed (a notice heard): read it again next pass."""
        with self._changed_lock:
            self._changed.add(worker_id)

    def step(self) -> float:
        """One pass (unless the last one ended too recently); the seconds until the next."""
        early = self._next_pass_at - self._monotonic()
        if early > 0:
            return early
        started = self._monotonic()
        full = self._full_pass_at is None or started >= self._full_pass_at
        if full:
            self._full_pass_at = started + FULL_PASS_SECONDS
        delay = self._pass(full)
        ended = self._monotonic()
        pacing = min(MAX_PACING_SECONDS, ended - started)
        self._next_pass_at = ended + pacing
        return delay

    def _pass(self, full: bool) -> float:
        """Read a snapshot, plan (pure), apply the plan and the changed reasons at once."""
        known, self._fleet = self._fleet, None  # a pass that fails reads the whole fleet next
        with self._changed_lock:
            stale, self._changed = self._changed, set()
        if self._monotonic() - self._fleet_read_at >= FLEET_REFRESH_SECONDS:
            known = None
        if known is None:
            self._fleet_read_at = self._monotonic()
        snapshot = self._placement.snapshot(
            quick=not full, fleet=known, changed=stale, partition=self._partition
        )
        decided = plan(snapshot, self._settings)
        # a reason is cached with the queued_at it was written for, and forgotten once its
        # run is placed: a run queued again (a retry, a preemption, whether or not it keeps
        # its place) gets its reason written afresh
        queued = {run.id: run.queued_at for run in snapshot.queued}
        changed = {
            run_id: reason
            for run_id, reason in decided.waiting.items()
            if self._reasons.get(run_id) != (queued[run_id], reason)
        }
        applied = self._placement.apply(decided, changed)
        if applied.traced:  # tracing on: each placed run's span, with the reason it waited
            waited = {
                run.run_id: self._reasons[run.run_id][1]
                for run in applied.traced
                if run.run_id in self._reasons
            }
            traces.runs_placed(applied.traced, waited)
        if applied.skipped:
            log.info("dispatcher: %d placements no longer fit", len(applied.skipped))
        placed = {placement.run_id for placement in applied.placed}
        for run_id, reason in changed.items():
            self._reasons[run_id] = (queued[run_id], reason)
        # a quick pass saw only part of the queue: forget only what it placed
        self._reasons = {
            run_id: cached
            for run_id, cached in self._reasons.items()
            if (run_id in queued or not full) and run_id not in placed
        }
        for preemption in applied.preempted:
            self.worker_changed(preemption.worker_id)
        if applied.skipped:  # the fleet was not as read: read it all again, at once
            return RETRY_SOON_SECONDS
        self._fleet = with_started(snapshot.workers, applied.started)
        return min(IDLE_SECONDS, max(0.0, (self._full_pass_at or 0.0) - self._monotonic()))
