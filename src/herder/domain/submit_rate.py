"""A tenant's submission rate, shared by every API process: the arithmetic of leasing.

Each tenant has one token bucket in the store (``rate`` tokens a second up to ``capacity``,
the burst). An API process does not spend from it submission by submission: it leases a few
tokens at once — ``BucketShape.lease_size``, a tenth of a second of rate — and spends them
locally, so the store is written once per lease, not once per submission (the scheme of
Envoy's rate limit quota service and of "token leasing" in general: a central budget handed
out in small assignments that each client enforces on its own).

The price is a bounded overshoot. A process asks for a new lease only once its tokens fall
short, and one lease at a time per tenant, so it never holds a whole ``lease_size`` unspent;
N processes hold fewer than N * ``lease_size`` tokens outside the shared bucket. Over any
window of T seconds a tenant is admitted at most ``capacity + rate * T + N * lease_size``
submissions — N tenths of a second of rate more than one process alone would allow. A tenth
of a second keeps that small beside a burst (one second of rate by default) while a tenant
at 1,000 submissions/s costs each process ten store writes a second.

What a process last saw of the shared bucket is an upper bound on it from then on (other
processes only take; refill is ``rate`` a second), so a submission it cannot cover is
refused locally, with a Retry-After, without a store round trip: a tenant hammering past its
rate costs the store nothing more until its Retry-After has passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from herder.domain.tenants import TenantQuotas

LEASE_SECONDS = 0.1  # seconds of rate a process leases at once
LEASE_SHARE_OF_BURST = 0.1  # and never more than this share of the burst
ROUNDING = 1e-9  # tokens: refills computed in floating point land a hair short of whole
# Quotas are stored as given; the bucket keeps to numbers its arithmetic (in SQL too) can
# hold: a rate past a billion a second is as good as unlimited, one below one per 30 years
# as good as none, and floats count whole tokens exactly below 2**53.
RATE_RANGE = (1e-9, 1e9)  # tokens a second
MAX_CAPACITY = 10**15  # tokens


@dataclass(frozen=True)
class BucketShape:
    rate: float  # tokens a second
    capacity: float  # the burst: tokens a full bucket holds

    @property
    def lease_size(self) -> float:
        """Tokens a process asks for at once, when it needs fewer (whole, at least one)."""
        return float(
            max(1, math.floor(min(self.rate * LEASE_SECONDS, self.capacity * LEASE_SHARE_OF_BURST)))
        )


def bucket_shape(quotas: TenantQuotas) -> BucketShape | None:
    """The shape of a tenant's bucket; None when its submissions are unlimited."""
    if quotas.submit_rate_per_second is None:
        return None
    low, high = RATE_RANGE
    rate = min(max(quotas.submit_rate_per_second, low), high)
    burst = quotas.submit_burst or max(1.0, rate)
    return BucketShape(rate=rate, capacity=float(min(burst, MAX_CAPACITY)))


@dataclass(frozen=True)
class LeaseAsk:
    """A lease to ask the shared bucket for: ``need`` tokens or none, up to ``want``.
    ``reserved`` are this process's own tokens set aside for the same submission."""

    count: int
    reserved: float
    need: float
    want: float


@dataclass
class Allowance:
    """One process's part of a tenant's shared bucket: tokens leased and not yet spent, and
    the shared bucket's level when it last saw it."""

    shape: BucketShape
    held: float = 0.0
    seen_tokens: float | None = None  # None: never seen (it may be full)
    seen_at: datetime | None = None

    def spend(self, count: int) -> bool:
        """Take ``count`` leased tokens, all or none."""
        if self.held < count - ROUNDING:
            return False
        self.held = max(0.0, self.held - count)
        return True

    def wait(self, count: int, now: datetime) -> float:
        """Seconds before the shared bucket can hold what this process lacks for ``count``
        (0.0: it may already; ask it)."""
        if self.seen_tokens is None or self.seen_at is None:
            return 0.0
        elapsed = max(0.0, (now - self.seen_at).total_seconds())
        most = min(self.shape.capacity, self.seen_tokens + elapsed * self.shape.rate)
        lacking = count - self.held - most
        return lacking / self.shape.rate if lacking > ROUNDING else 0.0

    def reserve(self, count: int) -> LeaseAsk:
        """Set this process's tokens aside for ``count`` and say what to lease for the rest:
        at least the rest, and a lease's size when the rest is smaller."""
        reserved, self.held = self.held, 0.0
        need = count - reserved
        return LeaseAsk(count, reserved, need, max(need, self.shape.lease_size))

    def settle(self, ask: LeaseAsk, granted: float, left: float, now: datetime) -> float:
        """Apply the lease's answer (``granted`` tokens, ``left`` in the shared bucket at
        ``now``): 0.0 when the submission is admitted, else the seconds to wait."""
        self.seen_tokens, self.seen_at = left, now
        if granted >= ask.need - ROUNDING:
            self.held = max(0.0, ask.reserved + granted - ask.count)
            return 0.0
        self.held += ask.reserved + granted
        return (ask.need - granted - left) / self.shape.rate

    def give_back(self, ask: LeaseAsk) -> None:
        """The lease failed: keep the tokens set aside."""
        self.held += ask.reserved

    def reshaped(self, shape: BucketShape) -> Allowance:
        """New quotas: keep at most a new lease's worth, and forget the shared level."""
        if shape == self.shape:
            return self
        return Allowance(shape, held=min(self.held, shape.lease_size))
