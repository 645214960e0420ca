"""The agent's tasks, each named and watched.

The reporter, the uid sweeper and a session's loops run until the agent cancels them; an
attempt's task runs until its attempt has ended and been handed to the reporter. A task that
raises instead (or, where it was not meant to, returns) would leave the agent claiming work it
can never report, or handing out uids it never swept. Its watch logs the traceback at once
and sets the event the agent stops on; the agent kills and reports its attempts where it still
can, and ``Agent.run`` raises the ``SideTaskDied`` (``herder worker`` exits non-zero).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from collections.abc import Coroutine, Iterator
from types import FrameType
from typing import Any

log = logging.getLogger("herder.worker")

CANCEL_AGAIN_SECONDS = 1.0  # a task closed that has not ended by then is cancelled again


class SideTaskDied(Exception):
    """A task the agent cannot work without ended on its own; the agent stopped."""

    def __init__(self, name: str, error: BaseException | None) -> None:
        how = f"died: {error!r}" if error is not None else "ended on its own"
        super().__init__(f"the worker's {name} {how}; the worker stopped")
        self.name = name
        self.error = error


class TaskWatch:
    """Tasks started here are watched; the first death sets ``died`` and is kept."""

    def __init__(self, died: asyncio.Event) -> None:
        self._died = died
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.death: SideTaskDied | None = None

    def start(
        self, name: str, work: Coroutine[Any, Any, None], *, may_return: bool = False
    ) -> None:
        """Run ``work`` as the task ``name``; raising is always a death, returning is one
        unless ``may_return``."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._ended, may_return=may_return))

    @property
    def pending(self) -> set[asyncio.Task[None]]:
        return set(self._tasks)

    def _ended(self, task: asyncio.Task[None], *, may_return: bool) -> None:
        self._tasks.discard(task)
        if self._closing:
            return
        error = None if task.cancelled() else task.exception()
        if error is None and may_return and not task.cancelled():
            return
        if self.death is None:
            self.death = SideTaskDied(task.get_name(), error)
            log.error("%s", self.death, exc_info=error)
        self._died.set()

    async def close(self) -> None:
        """Cancel what is still running, and wait for it to go. One that swallowed its cancel
        is cancelled again (Python 3.11's ``asyncio.wait_for``, for one, returns the result
        when the result and the cancel come in one turn of the loop: a worker's stop once
        waited for ever on a reporter that went back to waiting for work)."""
        self._closing = True
        tasks = set(self._tasks)
        while tasks:
            for task in tasks:
                task.cancel()
            ended, tasks = await asyncio.wait(tasks, timeout=CANCEL_AGAIN_SECONDS)
            for task in ended:
                if not task.cancelled():
                    task.exception()  # retrieved: it was being closed, its end is no news
            if tasks:
                log.warning("%s did not end when cancelled; cancelling again",
                            ", ".join(sorted(task.get_name() for task in tasks)))  # fmt: skip


async def first_of(*events: asyncio.Event) -> None:
    """Until any of ``events`` is set."""
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


def log_task_stacks() -> None:
    """Every task of the running loop with the chain of awaits it is stopped in, in one log
    record: where a worker that does not stop waits (``Task.print_stack`` shows only the
    outermost frame of each)."""
    tasks = sorted(asyncio.all_tasks(), key=lambda task: task.get_name())
    said = [f"{len(tasks)} asyncio tasks:"]
    for task in tasks:
        frames = traceback.StackSummary.extract((frame, frame.f_lineno) for frame in _awaits(task))
        said += [f"task {task.get_name()!r}, awaiting:", *frames.format()]
    log.warning("%s", "\n".join(line.rstrip() for line in said))


def _awaits(task: asyncio.Task[Any]) -> Iterator[FrameType]:
    """The frames of the coroutines ``task`` is in, outermost first."""
    awaited: Any = task.get_coro()
    while (
        frame := getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
    ) is not None:
        yield frame
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
