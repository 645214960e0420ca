"""In-process wake-ups for long-polling workers.

A worker's claim waits on its own signal; new work fires every worker's signal, a cancel or
freed capacity fires one. Signals only make a waiter wake sooner: the claim also re-checks
the store every ``FALLBACK_POLL_SECONDS``, so work submitted through another API replica is
still found.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

FALLBACK_POLL_SECONDS = 1.0


class _Signal:
    def __init__(self) -> None:
        self.generation = 0
        self._event = asyncio.Event()

    def fire(self) -> None:
        self.generation += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, since: int, timeout: float) -> None:
        if self.generation != since:
            return
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)


class Wakeups:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals: dict[str, _Signal] = {}
        self._lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def generation(self, worker_id: str) -> int:
        return self._signal(worker_id).generation

    async def wait(self, worker_id: str, since: int, timeout: float) -> None:
        await self._signal(worker_id).wait(since, min(timeout, FALLBACK_POLL_SECONDS))

    def work_available(self) -> None:
        """Safe from any thread: wake every waiting worker."""

        def fire_all() -> None:
            for signal in list(self._signals.values()):
                signal.fire()

        self._call(fire_all)

    def wake_worker(self, worker_id: str) -> None:
        self._call(lambda: self._signal(worker_id).fire())

    def forget(self, worker_id: str) -> None:
        self._call(lambda: self._signals.pop(worker_id, None))

    def _signal(self, worker_id: str) -> _Signal:
        with self._lock:
            signal = self._signals.get(worker_id)
            if signal is None:
                signal = self._signals[worker_id] = _Signal()
            return signal

    def _call(self, action: Callable[[], object]) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            action()
        else:
            self._loop.call_soon_threadsafe(action)
