"""Per-tenant submission rate limits that hold across every API process and host.

Each tenant's token bucket is in the store (``store/submit_buckets``), and each process
leases tokens from it a few at a time and spends them locally (``domain/submit_rate``): in
the common case a check is a dict lookup and a little arithmetic, as when the buckets were
per process, and the store is written once per lease — a tenth of a second of the tenant's
rate — not once per submission (the hot path is ~1,000 submissions/s). N processes admit at
most N leases more than the rate allows, where per-process buckets admitted N times it.

A tenant's quotas are read from the store at most once per ``QUOTA_TTL_SECONDS`` per process,
so a changed rate takes effect within that time everywhere (at once on the process that made
the change).

When the store cannot be reached, a submission that needs a lease answers 503, as its own
insert would: none is admitted on tokens nobody leased (fail closed), so a store that only
half answers cannot turn into unlimited submissions.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from herder.api.auth import Operator
from herder.clock import Clock, SystemClock
from herder.domain.errors import Invalid, RateLimited
from herder.domain.models import Principal
from herder.domain.submit_rate import Allowance, bucket_shape
from herder.domain.tenants import TenantQuotas
from herder.store.submit_buckets import SubmitBucketRepository

QUOTA_TTL_SECONDS = 5.0


@dataclass
class _Tenant:
    quotas_read_at: datetime | None  # None: read them again on the next submission
    allowance: Allowance | None  # None: no rate quota


class SubmitLimiter:
    """This process's allowances of every tenant it has seen."""

    def __init__(
        self,
        buckets: SubmitBucketRepository,
        read_quotas: Callable[[str], TenantQuotas],
        *,
        clock: Clock | None = None,
        quota_ttl_seconds: float = QUOTA_TTL_SECONDS,
    ) -> None:
        self._buckets = buckets
        self._read_quotas = read_quotas
        self._clock = clock or SystemClock()
        self._ttl = quota_ttl_seconds
        self._tenants: dict[str, _Tenant] = {}
        self._leasing: dict[str, asyncio.Lock] = {}
        self._lock = threading.Lock()

    def needs_quotas(self, tenant_id: str) -> bool:
        """True when the tenant's quotas must be (re)read first: call ``refresh``."""
        known = self._tenants.get(tenant_id)
        if known is None or known.quotas_read_at is None:
            return True
        age = (self._clock.now() - known.quotas_read_at).total_seconds()
        return not 0 <= age < self._ttl  # a wall clock stepped back reads them too

    def refresh(self, tenant_id: str) -> None:
        """Read the tenant's quotas from the store (blocking: run it off the event loop)."""
        shape = bucket_shape(self._read_quotas(tenant_id))
        with self._lock:
            known = self._tenants.get(tenant_id)
            allowance = known.allowance if known else None
            if shape is None:
                allowance = None
            elif allowance is None:
                allowance = Allowance(shape)
            else:
                allowance = allowance.reshaped(shape)
            self._tenants[tenant_id] = _Tenant(self._clock.now(), allowance)

    def quotas_changed(self, tenant_id: str) -> None:
        """Read the tenant's quotas again on its next submission."""
        with self._lock:
            known = self._tenants.get(tenant_id)
            if known is not None:
                known.quotas_read_at = None

    def take_held(self, tenant_id: str, count: int) -> bool:
        """Admit ``count`` submissions from the tokens this process holds: True if it did (or
        the tenant is not limited), False if a ``lease`` must decide. Raises ``RateLimited``
        when the shared bucket, as last seen, cannot have them yet, and ``Invalid`` for more
        than a burst, which waiting cannot admit. Call ``refresh`` first when
        ``needs_quotas`` says so; a tenant never refreshed is not limited."""
        known = self._tenants.get(tenant_id)
        if known is None or known.allowance is None:
            return True
        allowance = known.allowance
        if count > allowance.shape.capacity:
            raise Invalid(
                f"{count} runs are more than tenant {tenant_id}'s burst of "
                f"{allowance.shape.capacity:g} submissions; send at most "
                f"{allowance.shape.capacity:g} per batch",
                field="runs",
            )
        with self._lock:
            if allowance.spend(count):
                return True
            wait = allowance.wait(count, self._clock.now())
        if wait > 0:
            raise _rate_limited(tenant_id, allowance, wait)
        return False

    def leasing(self, tenant_id: str) -> asyncio.Lock:
        """Held while this process leases for the tenant: one lease at a time each, which
        bounds the tokens it holds (``domain/submit_rate``) and spares the store a herd."""
        return self._leasing.setdefault(tenant_id, asyncio.Lock())

    def lease(self, tenant_id: str, count: int) -> None:
        """Admit ``count`` submissions with tokens leased from the tenant's shared bucket, or
        raise ``RateLimited`` (blocking: run it off the event loop)."""
        known = self._tenants.get(tenant_id)
        if known is None or known.allowance is None:
            return
        allowance = known.allowance
        with self._lock:
            ask = allowance.reserve(count)
        now = self._clock.now()
        try:
            lease = self._buckets.lease(tenant_id, allowance.shape, ask, now)
        except BaseException:
            with self._lock:
                allowance.give_back(ask)
            raise
        with self._lock:
            wait = allowance.settle(ask, lease.granted, lease.left, now)
        if wait > 0:
            raise _rate_limited(tenant_id, allowance, wait)


def _rate_limited(tenant_id: str, allowance: Allowance, wait: float) -> RateLimited:
    rate, burst = allowance.shape.rate, allowance.shape.capacity
    return RateLimited(
        f"tenant {tenant_id} may submit {rate:g} runs per second "
        f"(bursts of {burst:g}); retry in {wait:.2f} s",
        retry_after_seconds=wait,
        rate=rate,
        burst=burst,
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
    await admit_tenant(caller.tenant_id, request, count)


async def admit_tenant(tenant_id: str, request: Request, count: int) -> None:
    """As ``admit``, for a tenant no key speaks for (an inbound webhook's)."""
    limiter = submit_limiter(request)
    if limiter.needs_quotas(tenant_id):
        await run_in_threadpool(limiter.refresh, tenant_id)
    if limiter.take_held(tenant_id, count):
        return
    async with limiter.leasing(tenant_id):
        if not limiter.take_held(tenant_id, count):  # another lease may have brought enough
            await run_in_threadpool(limiter.lease, tenant_id, count)


Submitter = Annotated[Principal, Depends(submitter)]
