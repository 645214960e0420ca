"""This scheduler's membership of the pool, and its view of the live members.

Each scheduler heartbeats a member lease; every loop's preferred holder is the live member that
rendezvous hashing picks for the loop's name, so the loops spread over the schedulers and
move when one joins or leaves. The view is only a preference: who actually runs a loop is
decided by its lease, and what a loop does is safe whoever runs it.
"""

from __future__ import annotations

import logging
import threading

from herder.domain.errors import HerderError
from herder.domain.rendezvous import preferred_member
from herder.store.leases import LeaseRepository

log = logging.getLogger("herder.control")


class Membership:
    def __init__(
        self,
        leases: LeaseRepository,
        holder: str,
        *,
        ttl_seconds: float,
        stop: threading.Event,
    ) -> None:
        self.holder = holder
        self._leases = leases
        self._ttl = ttl_seconds
        self._stop = stop
        self.members: frozenset[str] = frozenset({holder})

    def preferred_holder(self, loop: str) -> str:
        return preferred_member(loop, self.members)

    def refresh(self) -> None:
        """Heartbeat, then read who else is alive (this process always counts)."""
        self._leases.join(self.holder, self._ttl)
        members = frozenset(self._leases.members()) | {self.holder}
        if members != self.members:
            joined, left = sorted(members - self.members), sorted(self.members - members)
            log.info("scheduler members: %s (joined: %s; left: %s)", ", ".join(sorted(members)),
                     ", ".join(joined) or "-", ", ".join(left) or "-")  # fmt: skip
        self.members = members

    def run(self) -> None:
        """Refresh every third of the lease until stopped (the first refresh is ``start``'s)."""
        while not self._stop.wait(self._ttl / 3):
            try:
                self.refresh()
            except HerderError as error:  # our loops' leases lapse as this one does
                log.warning("membership: %s; trying again", error)
            except Exception:  # a bug: say so loudly, but keep heartbeating
                log.exception("membership: unexpected error; trying again")

    def leave(self) -> None:
        try:
            self._leases.leave(self.holder)
        except HerderError as error:  # our member lease will expire by itself
            log.warning("membership: could not leave: %s", error)
