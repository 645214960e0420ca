"""Per-tenant submission rate limits: one token bucket per tenant, in this API process.

Buckets live in memory, per process: N API replicas behind a load balancer admit up to N
times a tenant's ``submit_rate_per_second`` (and N bursts). Sharing the buckets would cost a
store round trip per submission, which the hot path (~1,000 submissions/s) cannot afford.

A tenant's quotas are read from the store at most once per ``QUOTA_TTL_SECONDS`` per process,
so a changed rate takes effect within that time everywhere (at once on the process that made
the change). Between reads a check is a dict lookup and a little arithmetic.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from herder.api.auth import Operator
from herder.domain.errors import Invalid, RateLimited
from herder.domain.models import Principal
from herder.domain.tenants import TenantQuotas

QUOTA_TTL_SECONDS = 5.0
_ROUNDING = 1e-9  # tokens: refills computed in floating point land a hair short of whole


@dataclass
class TokenBucket:
    """Holds up to ``capacity`` tokens, refilled at ``rate`` per second; a submission takes
    one. Time is a reading of the caller's clock, in seconds."""

    rate: float
    capacity: float
    tokens: float
    updated: float

    @classmethod
    def full(cls, rate: float, capacity: float, now: float) -> TokenBucket:
        return cls(rate=rate, capacity=capacity, tokens=capacity, updated=now)

    def take(self, now: float, count: int = 1) -> float:
        """Take ``count`` tokens (at most ``capacity``), all or none: 0.0 if they were there,
        else the seconds until they will be."""
        self._refill(now)
        if self.tokens >= count - _ROUNDING:
            self.tokens = max(0.0, self.tokens - count)
            return 0.0
        return (count - self.tokens) / self.rate

    def reshape(self, rate: float, capacity: float, now: float) -> None:
        """New quotas: refill at the old rate up to now, then keep what fits."""
        self._refill(now)
        self.rate, self.capacity = rate, capacity
        self.tokens = min(self.tokens, capacity)

    def _refill(self, now: float) -> None:
        if now > self.updated:  # a clock read before the last one adds nothing
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now


def bucket_shape(quotas: TenantQuotas) -> tuple[float, float] | None:
    """(rate, capacity) of a tenant's bucket; None when its submissions are unlimited."""
    rate = quotas.submit_rate_per_second
    if rate is None:
        return None
    return rate, float(quotas.submit_burst or max(1.0, rate))


@dataclass
class _Tenant:
    quotas_read_at: float
    bucket: TokenBucket | None  # None: no rate quota


class SubmitLimiter:
    """The buckets of every tenant seen by this process. ``clock`` returns seconds
    (monotonic by default) so tests move time by hand."""

    def __init__(
        self,
        read_quotas: Callable[[str], TenantQuotas],
        *,
        clock: Callable[[], float] = time.monotonic,
        quota_ttl_seconds: float = QUOTA_TTL_SECONDS,
    ) -> None:
        self._read_quotas = read_quotas
        self._clock = clock
        self._ttl = quota_ttl_seconds
        self._tenants: dict[str, _Tenant] = {}
        self._lock = threading.Lock()

    def needs_quotas(self, tenant_id: str) -> bool:
        """True when the tenant's quotas must be (re)read first: call ``refresh``."""
        known = self._tenants.get(tenant_id)
        return known is None or self._clock() - known.quotas_read_at >= self._ttl

    def refresh(self, tenant_id: str) -> None:
        """Read the tenant's quotas from the store (blocking: run it off the event loop)."""
        shape = bucket_shape(self._read_quotas(tenant_id))
        with self._lock:
            now = self._clock()
            known = self._tenants.get(tenant_id)
            bucket = known.bucket if known else None
            if shape is None:
                bucket = None
            elif bucket is None:
                bucket = TokenBucket.full(*shape, now)
            else:
                bucket.reshape(*shape, now)
            self._tenants[tenant_id] = _Tenant(quotas_read_at=now, bucket=bucket)

    def quotas_changed(self, tenant_id: str) -> None:
        """Read the tenant's quotas again on its next submission (its tokens are kept)."""
        with self._lock:
            known = self._tenants.get(tenant_id)
            if known is not None:
                known.quotas_read_at = -math.inf

    def take(self, tenant_id: str, count: int = 1) -> None:
        """Admit ``count`` submissions, all or none, or raise ``RateLimited`` (``Invalid``
        for more than a burst, which waiting cannot admit). Call ``refresh`` first when
        ``needs_quotas`` says so; a tenant never refreshed is not limited."""
        known = self._tenants.get(tenant_id)
        if known is None or known.bucket is None:
            return
        bucket = known.bucket
        if count > bucket.capacity:
            raise Invalid(
                f"{count} runs are more than tenant {tenant_id}'s burst of {bucket.capacity:g} "
                f"submissions; send at most {bucket.capacity:g} per batch",
                field="runs",
            )
        with self._lock:
            wait = bucket.take(self._clock(), count)
        if wait > 0:
            raise RateLimited(
                f"tenant {tenant_id} may submit {bucket.rate:g} runs per second "
                f"(bursts of {bucket.capacity:g}); retry in {wait:.2f} s",
                retry_after_seconds=wait,
                rate=bucket.rate,
                burst=bucket.capacity,
            )


def submit_limiter(request: Request) -> SubmitLimiter:
    limiter: SubmitLimiter = request.app.state.submit_limiter
    return limiter


async def submitter(caller: Operator, request: Request) -> Principal:
    """An operator (or more) whose tenant is within its submission rate (else 429)."""
    await admit(caller, request, 1)
    return caller


async def admit(caller: Principal, request: Request, count: int) -> None:
    """Take ``count`` submissions from the caller's tenant's bucket (else 429)."""
    limiter = submit_limiter(request)
    if limiter.needs_quotas(caller.tenant_id):
        await run_in_threadpool(limiter.refresh, caller.tenant_id)
    limiter.take(caller.tenant_id, count)


Submitter = Annotated[Principal, Depends(submitter)]
