"""Running a loop only while holding its lease.

Each pass: take or renew the lease, run one step, sleep until the step's next wake-up (or a
notice, or the next renewal), whichever comes first. A holder that cannot renew stops
stepping at once; a standby takes the lease when it expires. Correctness never rests on the
lease alone — every step is conditional updates that are harmless if run twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from herder.domain.errors import HerderError
from herder.store.leases import LeaseRepository
from herder.telemetry import metrics

log = logging.getLogger("herder.control")

ERROR_PAUSE_SECONDS = 1.0


class Loop(Protocol):
    """A control loop's body: a name for its lease, and one pass returning when to wake."""

    name: str

    def step(self) -> float: ...


class LeasedLoop:
    def __init__(
        self,
        name: str,
        leases: LeaseRepository,
        holder: str,
        step: Callable[[], float],
        *,
        ttl_seconds: float,
        wake: threading.Event,
        stop: threading.Event,
    ) -> None:
        self.name = name
        self._leases = leases
        self._holder = holder
        self._step = step
        self._ttl = ttl_seconds
        self._wake = wake
        self._stop = stop
        self.fencing: int | None = None  # set while this process holds the lease

    @property
    def _renew_every(self) -> float:
        return self._ttl / 3

    def run(self) -> None:
        renewed_at = 0.0
        while not self._stop.is_set():
            try:
                if not self._hold(renewed_at):
                    self._stop.wait(self._renew_every)
                    continue
                if time.monotonic() - renewed_at >= self._renew_every:
                    renewed_at = time.monotonic()
                with metrics.loop_pass(self.name):
                    delay = self._step()
                until_renewal = self._renew_every - (time.monotonic() - renewed_at)
                self._wake.wait(max(0.0, min(delay, until_renewal)))
                self._wake.clear()
            except HerderError as error:  # the store wraps driver errors as these
                log.warning("%s: %s; trying again in %ss", self.name, error, ERROR_PAUSE_SECONDS)
                self._stop.wait(ERROR_PAUSE_SECONDS)
            except Exception:  # a bug: say so loudly, but keep the loop (nothing else runs it)
                log.exception("%s: unexpected error; trying again in %ss", self.name,
                              ERROR_PAUSE_SECONDS)  # fmt: skip
                self._stop.wait(ERROR_PAUSE_SECONDS)
        if self.fencing is not None:
            try:
                self._leases.release(self.name, self._holder, self.fencing)
            except HerderError as error:  # it will expire by itself
                log.warning("%s: could not release the lease: %s", self.name, error)
            self.fencing = None

    def _hold(self, renewed_at: float) -> bool:
        """Take the lease, or renew it when due; ``False`` while another process holds it."""
        if self.fencing is None:
            self.fencing = self._leases.acquire(self.name, self._holder, self._ttl)
            if self.fencing is not None:
                log.info("%s: took the lease (fencing %d)", self.name, self.fencing)
            return self.fencing is not None
        if time.monotonic() - renewed_at < self._renew_every:
            return True
        if self._leases.renew(self.name, self._holder, self.fencing, self._ttl):
            return True
        log.warning("%s: lost the lease (fencing %d); standing by", self.name, self.fencing)
        self.fencing = None
        return False
