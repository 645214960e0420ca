"""Per-attempt cgroups made ahead, and removed after, by a thread of their own.

Making an attempt's cgroup and removing it is a good part of what its cgroup costs on cgroup
v1 (a directory in each of four hierarchies: about 0.4 ms of the worker's CPU, of ~1.1), and
none of it depends on the attempt. A ``CgroupPool`` keeps ``size`` empty cgroups ready, so
that an attempt takes one at once; its limits are still written when it takes it
(``CgroupEnforcer.confine``), as each attempt's differ. It takes that work off the attempt's
path, not off the host: on a 2-core VM whose CPU the attempts saturate, neither one attempt
at a time nor the one-off rate moved beyond the VM's noise (bench/RESULTS.md, 2026-12-07).

A used cgroup is never handed out again (a memory cgroup keeps its charges after its
processes are gone: ``cgroups.py``). It comes back here (``retire``) and the thread removes
it: at once when empty, as it almost always is; else what is inside is killed, and the
removal tried again on the thread's next pass, ``RETRY_SECONDS`` later at most. Neither the
agent's event loop nor an attempt's end waits for it.

    take ──► attempt's limits written, job runs, collect ──► retire ──► thread: rmdir
      ▲                                                                   (busy: kill, retry)
      └── thread: mkdir, one directory per hierarchy on v1, until ``size`` are ready

When none is ready (``take`` returns None: a burst took them all, the thread could not make
one) the attempt makes its own, as without a pool. ``close`` removes every cgroup the pool
made or was handed back; a worker that crashed leaves them to the next one's ``clear``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from pathlib import Path

from herder.worker.cgroupfs import close_all, kill_members, make, remove, try_remove

log = logging.getLogger("herder.worker")

READY_CGROUPS = 16  # a worker's default: a burst of starts past it makes its own meanwhile
GATHER_SECONDS = 0.1  # how long a used cgroup may wait for others, to be removed with them
RETRY_SECONDS = 0.05  # how soon a used cgroup that was not empty yet is tried again
FAILED_RETRY_SECONDS = 1.0  # how soon making one is tried again after it failed
NAME_PREFIX = "ready-"  # made ahead: named by number, not by the attempt that takes it


class CgroupPool:
    """``size`` cgroups ready under ``parents`` (controller -> the worker's parent cgroup of
    that hierarchy), each handed out once; safe to use from any thread."""

    def __init__(self, parents: dict[str, Path], size: int) -> None:
        self._parents = parents
        self._size = size
        self._batch = max(1, size // 2)  # made, or removed, in one wake of the thread
        self._ready: deque[dict[str, Path]] = deque()
        self._used: list[list[Path]] = []  # handed back, for the thread to remove
        self._busy: list[Path] = []  # the thread's: used, not empty yet when it tried
        self._numbers = itertools.count(1)
        self._changed = threading.Condition()
        self._closing = False
        self._failing = False  # the last try to make one failed: said once in the log
        self._thread = threading.Thread(target=self._keep, name="herder cgroups", daemon=True)
        self._thread.start()

    def take(self) -> dict[str, Path] | None:
        """A ready cgroup's directory of each controller, or None when none is ready."""
        with self._changed:
            if not self._ready or not self._thread.is_alive():
                return None
            cgroup = self._ready.popleft()
            if len(self._ready) == self._size - self._batch:
                self._changed.notify()
        return cgroup

    def retire(self, directories: list[Path]) -> bool:
        """Hand back a used cgroup (its directories, one per hierarchy), for the thread to
        remove; False when it cannot (its thread is gone): the caller removes it."""
        with self._changed:
            if self._closing or not self._thread.is_alive():
                return False
            self._used.append(directories)
            if len(self._used) in (1, self._batch):  # the first starts the thread's wait
                self._changed.notify()
        return True

    def close(self) -> None:
        """Stop the thread and remove every cgroup it made or was handed back, killing what
        is still inside (every attempt has ended)."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._thread.join()
        leftovers = [*self._busy, *(directory for used in self._used for directory in used)]
        leftovers += [directory for cgroup in self._ready for directory in _unique(cgroup)]
        self._ready.clear()
        self._used, self._busy = [], []
        for directory in leftovers:
            remove(directory)

    def _keep(self) -> None:
        """The thread: remove what was handed back, then make ready ones up to ``size``; it
        wakes once per ``size / 2`` taken or handed back (or ``GATHER_SECONDS`` after the
        first handed back), not for each: every wake costs the worker a thread switch."""
        try:
            while True:
                with self._changed:
                    while not self._has_work() and self._changed.wait(self._patience()):
                        pass
                    if self._closing:
                        return
                    used, self._used = self._used, []
                handed = [directory for directories in used for directory in directories]
                self._busy = [
                    directory for directory in self._busy + handed if not _gone(directory)
                ]
                self._fill()
        except Exception:
            log.exception("the cgroup pool's thread failed: attempts make and remove their own")

    def _has_work(self) -> bool:
        short = len(self._ready) <= self._size - self._batch and not self._failing
        return self._closing or len(self._used) >= self._batch or short

    def _patience(self) -> float | None:
        """How long the thread may sleep before it looks again, though not woken."""
        if self._busy:
            return RETRY_SECONDS
        if self._used:
            return GATHER_SECONDS
        return FAILED_RETRY_SECONDS if self._failing else None

    def _fill(self) -> None:
        while True:
            with self._changed:
                if self._closing or len(self._ready) >= self._size:
                    return
            number = next(self._numbers)
            cgroup = {
                controller: parent / f"{NAME_PREFIX}{number}"
                for controller, parent in self._parents.items()
            }
            made: list[Path] = []
            try:
                for directory in _unique(cgroup):
                    make(directory)
                    made.append(directory)
            except OSError as error:
                if not self._failing:
                    log.warning("cannot make cgroups ahead (%s): attempts make their own "
                                "until it can", error.strerror)  # fmt: skip
                self._failing = True
                self._busy += made
                return  # tried again in FAILED_RETRY_SECONDS, or on a retire before
            self._failing = False
            with self._changed:
                self._ready.append(cgroup)


def _gone(directory: Path) -> bool:
    """Remove a used cgroup without waiting; when something is inside still, kill it (it
    goes on the next pass)."""
    if try_remove(directory):
        return True
    close_all(kill_members(directory))
    return False


def _unique(cgroup: dict[str, Path]) -> list[Path]:
    return list(dict.fromkeys(cgroup.values()))
