"""Wake-ups for long-polling workers, fed by the store's notices of committed changes.

A worker's claim waits on its own signal; the dispatcher placing work on the worker fires it,
and so does a cancel (which also marks news, so the claim looks up what to stop).
Signals only make a waiter wake sooner: the claim re-checks the store every
``FALLBACK_POLL_SECONDS`` whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

from herder.store.database import LISTENING
from herder.store.notifications import ASSIGNED, CANCEL, WORKER_CHANNEL

FALLBACK_POLL_SECONDS = 1.0
# A stream's look without a notice: notices wake it, and the listener says when it (re)starts
# listening, so this is for what neither says (an attempt handed over again after its grace).
# An idle fleet of 10,000 streaming workers costs 2,000 looks a second, not 10,000.
STREAM_FALLBACK_SECONDS = 5.0


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
            async with asyncio.timeout(timeout):
                await event.wait()


class Wakeups:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals: dict[str, _Signal] = {}
        self._news: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """The server is stopping: wake every waiter so long-polls answer now."""
        self._closed = True
        self.wake_all()

    def on_notice(self, channel: str, payload: str) -> None:
        """A store subscriber: safe from any thread."""
        if channel == LISTENING:  # notices may have gone unheard: every waiter looks again
            with self._lock:
                self._news.update(self._signals)
            self.wake_all()
            return
        if channel != WORKER_CHANNEL:
            return
        kind, _, worker_id = payload.partition(":")
        if kind == CANCEL:
            self._news.add(worker_id)
        if kind in (CANCEL, ASSIGNED):
            self.wake_worker(worker_id)

    def take_news(self, worker_id: str) -> bool:
        """True once after a cancel concerning this worker was heard."""
        with self._lock:
            if worker_id in self._news:
                self._news.discard(worker_id)
                return True
            return False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def generation(self, worker_id: str) -> int:
        return self._signal(worker_id).generation

    async def wait(
        self, worker_id: str, since: int, timeout: float, fallback: float = FALLBACK_POLL_SECONDS
    ) -> None:
        """Until the worker's signal fires after ``since``, ``timeout`` passes, or the
        ``fallback`` look is due."""
        await self._signal(worker_id).wait(since, min(timeout, fallback))

    def wake_all(self) -> None:
        """Safe from any thread: wake every waiting worker."""

        def fire_all() -> None:
            for signal in list(self._signals.values()):
                signal.fire()

        self._call(fire_all)

    def wake_worker(self, worker_id: str) -> None:
        self._call(lambda: self._signal(worker_id).fire())

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
