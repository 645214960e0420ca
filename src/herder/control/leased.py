"""Running a loop only while holding its lease.

Each pass: take or renew the lease, run one step when its time has come (what the last step
asked for, or a notice), sleep until that time or the next renewal, whichever comes first. A
renewal alone runs no step: each loop's own ceiling already bounds a step missed for want of
a notice, and a step at every renewal cost an idle scheduler with 2 s leases half its CPU
(and ran maintenance every few seconds, not every ten minutes). A holder that cannot renew
stops stepping at once; a standby takes the lease when it expires. Correctness never rests
on the lease alone — every step is conditional updates that are harmless if run twice.

With several schedulers, each loop has a preferred holder (``Membership``): a holder that is
not the preferred one hands the lease to it after its pass, and a process that is not the
preferred one takes a free lease only once it has been free for a grace (the preferred
process would have taken it by then, were it alive) — so the loops spread and none stays
unheld.
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
TAKEOVER_GRACE_RENEWALS = 2  # a free lease waits this many renewal periods for its preferred


class Loop(Protocol):
    """A control loop's body: a name for its lease, and one pass returning when to wake."""

    name: str

    def step(self) -> float: ...


class Placement(Protocol):
    """Who should hold a loop's lease, as this process sees the live schedulers."""

    def preferred_holder(self, loop: str) -> str: ...


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
        placement: Placement | None = None,  # None: alone, every lease is ours to keep
        on_held: Callable[[], None] | None = None,  # told each time this process takes it
    ) -> None:
        self.name = name
        self._leases = leases
        self._holder = holder
        self._step = step
        self._ttl = ttl_seconds
        self._wake = wake
        self._stop = stop
        self._placement = placement
        self._on_held = on_held
        self.fencing: int | None = None  # set while this process holds the lease
        self._failing_since: float | None = None  # the store has failed each pass since

    @property
    def _renew_every(self) -> float:
        return self._ttl / 3

    def _successor(self) -> str | None:
        """The process this loop's lease should go to, when not this one."""
        if self._placement is None:
            return None
        preferred = self._placement.preferred_holder(self.name)
        return None if preferred == self._holder else preferred

    def run(self) -> None:
        renewed_at = 0.0
        step_at = 0.0  # when the next step is due: what the last one asked, or a notice
        while not self._stop.is_set():
            try:
                if not self._hold(renewed_at):
                    self._recovered()
                    step_at = 0.0  # a holder again steps at once
                    self._stop.wait(self._renew_every)
                    continue
                if time.monotonic() - renewed_at >= self._renew_every:
                    renewed_at = time.monotonic()
                if time.monotonic() >= step_at:
                    with metrics.loop_pass(self.name):
                        step_at = time.monotonic() + self._step()
                self._recovered()
                if self._hand_over():
                    step_at = 0.0
                    self._stop.wait(self._renew_every)  # for the successor to take it
                    continue
                now = time.monotonic()
                until_renewal = self._renew_every - (now - renewed_at)
                if self._wake.wait(max(0.0, min(step_at - now, until_renewal))):
                    step_at = 0.0  # a notice: step now, whatever the last step asked
                self._wake.clear()
            except HerderError as error:  # the store wraps driver errors as these
                self._failed(error)
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
            self._let_go()

    def _failed(self, error: HerderError) -> None:
        """Said once an outage (a database failing over fails every pass for seconds, and
        a dozen loops saying so each second buried everything else), then quietly."""
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning("%s: %s; trying again every %ss, quietly until it works",
                        self.name, error, ERROR_PAUSE_SECONDS)  # fmt: skip
        else:
            log.debug("%s: %s", self.name, error)

    def _recovered(self) -> None:
        if self._failing_since is not None:
            log.warning("%s: the store answers again after %.1f s", self.name,
                        time.monotonic() - self._failing_since)  # fmt: skip
            self._failing_since = None

    def _hold(self, renewed_at: float) -> bool:
        """Take the lease, or renew it when due; ``False`` while another process holds it."""
        if self.fencing is None:
            grace = (
                0.0 if self._successor() is None else TAKEOVER_GRACE_RENEWALS * self._renew_every
            )
            self.fencing = self._leases.acquire(
                self.name, self._holder, self._ttl, free_for_seconds=grace
            )
            if self.fencing is not None:
                log.info("%s: %s took the lease (fencing %d)", self.name, self._holder,
                         self.fencing)  # fmt: skip
                metrics.loop_held(self.name, held=True)
                if self._on_held is not None:
                    self._on_held()
            return self.fencing is not None
        if time.monotonic() - renewed_at < self._renew_every:
            return True
        if self._leases.renew(self.name, self._holder, self.fencing, self._ttl):
            return True
        log.warning("%s: lost the lease (fencing %d); standing by", self.name, self.fencing)
        self._let_go()
        return False

    def _hand_over(self) -> bool:
        """After a pass, give the lease to its preferred holder if that is another process.
        Refused (the lease lapsed, or the successor has left), it is let go all the same: the
        next pass takes it again while it is still ours."""
        successor = self._successor()
        if successor is None or self.fencing is None:
            return False
        if self._leases.hand_over(self.name, self._holder, self.fencing, successor):
            log.info("%s: %s handed the lease to %s", self.name, self._holder, successor)
        self._let_go()
        return True

    def _let_go(self) -> None:
        self.fencing = None
        metrics.loop_held(self.name, held=False)
