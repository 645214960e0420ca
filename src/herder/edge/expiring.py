"""A cache of the directory's answers that trusts each for a bounded time: an answer read at
``t`` is served until ``t + ttl`` (the time taken from before the read, so staleness never
exceeds the ttl), a miss reads once however many requests wait for the same key, and an
absent answer (None) is kept for its own, shorter time. The clock is injected: tests step it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

Value = TypeVar("Value")
# Past this the cache starts afresh (a flood of unknown tenants). An entry costs about 300
# bytes (its key, its slot, its expiry and a ``Residence`` naming cells kept once: 26 MB for
# 100,000 tenants, bench/directory.py), so a full cache, ten times the brief's tenants, is
# some 300 MB.
MAX_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class _Entry(Generic[Value]):
    until: float
    value: Value | None


class ExpiringCache(Generic[Value]):
    def __init__(
        self,
        load: Callable[[str], Awaitable[Value | None]],
        *,
        ttl_seconds: float,
        absent_ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._ttl = ttl_seconds
        self._absent_ttl = absent_ttl_seconds
        self._clock = clock
        self._entries: dict[str, _Entry[Value]] = {}
        self._loading: dict[str, asyncio.Future[Value | None]] = {}

    def fresh(self, key: str) -> _Entry[Value] | None:
        """The entry for ``key`` while it may be trusted (no await: the hot path)."""
        entry = self._entries.get(key)
        if entry is None or entry.until <= self._clock():
            return None
        return entry

    async def get(self, key: str) -> Value | None:
        if (entry := self.fresh(key)) is not None:
            return entry.value
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._read(key))
            self._loading[key] = pending
        # one waiter gone (its client hung up) leaves the read to the others
        return await asyncio.shield(pending)

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)

    async def _read(self, key: str) -> Value | None:
        started = self._clock()
        try:
            value = await self._load(key)
        finally:
            self._loading.pop(key, None)
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        ttl = self._ttl if value is not None else self._absent_ttl
        self._entries[key] = _Entry(started + ttl, value)
        return value
