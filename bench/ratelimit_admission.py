"""What a submission's rate check costs: ``admit()`` (the API's dependency) 10,000 times for
one tenant, on PostgreSQL and SQLite.

- ``unlimited``: a tenant without a rate quota, a dict lookup: the floor.
- ``1000/s``: a tenant at its rate, 1,000 submissions a second (the clock moves 1 ms a
  check): a lease of 100 tokens every 100 checks, the common case.
- ``10/s``: a slow rate, where a lease is one token: a store write per check, the most
  a check can cost.

Run: ``.venv/bin/python -m bench.ratelimit_admission`` (PostgreSQL on 127.0.0.1:5432).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.dispatch_store import postgres_database, sqlite_database
from herder.api.ratelimit import SubmitLimiter, admit
from herder.domain.models import Principal, Role
from herder.store.store import Store

CHECKS = 10_000
POSTGRES_DATABASE = "herder_bench_ratelimit"


class HandClock:
    """The limiter's clock, moved by the loop: a tenant submitting at a steady rate."""

    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def now(self) -> datetime:
        return self.moment


def _measure(store: Store, quotas: dict[str, float] | None, seconds_apart: float) -> float:
    """Microseconds per ``admit()``, every one admitted."""
    tenant = store.access.create_tenant(f"bench-{time.monotonic_ns()}")
    if quotas:
        store.access.update_tenant(tenant.id, quota_changes=quotas)
    clock, apart = HandClock(), timedelta(seconds=seconds_apart)
    limiter = SubmitLimiter(store.submit_buckets, store.access.tenant_quotas, clock=clock)
    request: Any = SimpleNamespace(
        app=SimpleNamespace(state=SimpleNamespace(submit_limiter=limiter))
    )
    caller = Principal(tenant_id=tenant.id, role=Role.ADMIN, key_id="key_bench", is_system=False)

    async def checks() -> float:
        await admit(caller, request, 1)  # the quotas read, the bucket made
        started = time.perf_counter()
        for _ in range(CHECKS):
            clock.moment += apart
            await admit(caller, request, 1)
        return time.perf_counter() - started

    return asyncio.run(checks()) / CHECKS * 1e6


def measure(url: str) -> dict[str, float]:
    store = Store(url)
    store.migrate()
    try:
        return {
            "unlimited": _measure(store, None, 0.0),
            "1000/s": _measure(store, {"submit_rate_per_second": 1000.0}, 0.001),
            "10/s": _measure(store, {"submit_rate_per_second": 10.0}, 0.1),
        }
    finally:
        store.close()


def main() -> None:
    with postgres_database(POSTGRES_DATABASE) as url:
        results = {"postgresql": measure(url)}
    with tempfile.TemporaryDirectory() as home, sqlite_database(Path(home), "bench") as url:
        results["sqlite"] = measure(url)
    for dialect, cases in results.items():
        line = ", ".join(f"{case} {micros:.1f} µs" for case, micros in cases.items())
        print(f"{dialect}: {CHECKS:,} admission checks, per check: {line}")


if __name__ == "__main__":
    main()
