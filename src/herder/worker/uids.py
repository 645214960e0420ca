"""One unprivileged uid per running attempt, and killing everything that uid runs.

When the worker runs as root, each attempt runs under a uid no other attempt holds at the same
time: attempts cannot signal or read each other, and once an attempt ends every process of its
uid can be killed, even a grandchild that left the attempt's process group with ``setsid``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pwd
import re
import shutil
import signal
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO

SWEEP_SECONDS = 0.2  # finished uids are swept (and reused) at most this often
KILL_ROUNDS = 5  # a process may fork between our scan and our kill; look again this often
KILL_ROUND_PAUSE_SECONDS = 0.01  # lets the killed processes become zombies before we look again
SYSTEM_PYTHON = "/usr/bin/python3"
STATUS_READ_BYTES = 4096  # /proc/<pid>/status has State and Uid within its first kilobyte


class UidPool:
    """Hands out the uids of ``base … base + size - 1`` in turn, the least recently released
    first; used from one thread.

    Rotating rather than reusing the lowest free uid keeps a uid idle for as long as the pool
    allows between two attempts (4096 attempts by default), and nothing an attempt owned
    outlives it anyway: its processes are swept (``UidSweeper``) before the uid returns here,
    and everything it could write lived on its own disk, unmounted when it ended.
    """

    def __init__(self, base: int, size: int) -> None:
        if base <= 0 or size <= 0:
            raise ValueError(f"a uid pool needs base > 0 and size > 0, not {base} and {size}")
        self._base = base
        self._size = size
        self._free = deque(range(base, base + size))
        self._in_use: set[int] = set()

    @property
    def base(self) -> int:
        return self._base

    def all_uids(self) -> frozenset[int]:
        return frozenset(range(self._base, self._base + self._size))

    def acquire(self) -> int:
        if not self._free:
            last = self._base + self._size - 1
            raise RuntimeError(f"all {self._size} sandbox uids ({self._base}-{last}) are in use")
        uid = self._free.popleft()
        self._in_use.add(uid)
        return uid

    def release(self, uid: int) -> None:
        if uid not in self._in_use:
            raise ValueError(f"uid {uid} is not in use in this pool")
        self._in_use.remove(uid)
        self._free.append(uid)


RANGE_TRIES = 16  # how many consecutive ranges a worker tries before giving up
OVERFLOW_UID_FILE = Path("/proc/sys/kernel/overflowuid")
NO_UID = 65535  # (uid_t)-1 in 16 bits: "no uid" to older interfaces, never a user
LOCK_NAME = re.compile(r"herder-uids-(\d+)-(\d+)\.lock")


class HeldRange:
    """A uid range's lock file, held until ``release`` or until its worker dies."""

    def __init__(self, path: Path, file: IO[bytes]) -> None:
        self._path = path
        self._file = file

    def release(self) -> None:
        """Give the range back, and its file: removed while no worker is choosing, so none
        can be about to lock it."""
        with _choosing(self._path.parent):
            self._path.unlink(missing_ok=True)
            self._file.close()


def reserve_uid_pool(
    base: int, size: int, lock_directory: Path, host_uids: frozenset[int] | None = None
) -> tuple[UidPool, HeldRange]:
    """A pool over a uid range no other worker on this host holds and no account of the host
    owns (``host_uids``, by default ``uids_of_the_host()``).

    A range with ``nobody`` (65534) in it would have the worker kill every ``nobody``
    process of the host when it starts and whenever an attempt ran under that uid, and give
    an attempt the files such daemons own: such a range is skipped like a held one.

    Two workers whose ranges overlap would kill each other's attempts when an attempt ends,
    and a worker's range also names its network filter (``host.py``), so each range is held
    through an exclusive lock file in ``lock_directory`` (which must be one no job can
    write: ``statedir.secure_directory``; a link there is never followed), which the kernel
    releases when its worker dies. Workers choose one at a time (the directory itself is
    locked meanwhile), skipping every range that overlaps one held, whatever base its worker
    was given. Release the range when the pool is no longer used.
    """
    accounts = uids_of_the_host() if host_uids is None else host_uids
    with _choosing(lock_directory):
        held = _held_ranges(lock_directory)
        for index in range(RANGE_TRIES):
            start = base + index * size
            if any(start < end and first < start + size for first, end in held):
                continue
            if any(start <= uid < start + size for uid in accounts):
                continue
            path = lock_directory / f"herder-uids-{start}-{size}.lock"
            lock = _lock(path)
            if lock is not None:  # else taken by a worker that does not lock the directory
                return UidPool(start, size), HeldRange(path, lock)
    raise RuntimeError(
        f"the {RANGE_TRIES} uid ranges of {size} from {base} all overlap ranges other workers "
        "on this host hold or uids its accounts own; pass another --run-uid-base"
    )


def uids_of_the_host() -> frozenset[int]:
    """Every uid an account of the host owns, the kernel's overflow uid (what ``nobody`` is,
    and what an unmapped uid shows as) and 65535: none of them may run an attempt."""
    try:
        overflow = int(OVERFLOW_UID_FILE.read_text())
    except (OSError, ValueError):
        overflow = 65534
    return frozenset({entry.pw_uid for entry in pwd.getpwall()} | {overflow, NO_UID})


@contextlib.contextmanager
def _choosing(lock_directory: Path) -> Iterator[None]:
    """The directory locked while one worker looks at the ranges held and takes its own."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(lock_directory, flags)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _held_ranges(lock_directory: Path) -> list[tuple[int, int]]:
    """``(first, end)`` of every range whose lock file a living worker holds."""
    held = []
    for path in lock_directory.iterdir():
        match = LOCK_NAME.fullmatch(path.name)
        if match is None:
            continue
        lock = _lock(path)
        if lock is None:
            first, size = int(match[1]), int(match[2])
            held.append((first, first + size))
        else:  # its worker is gone
            lock.close()
    return held


def _lock(path: Path) -> IO[bytes] | None:
    """``path`` opened and locked, or None while someone else holds it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.fdopen(os.open(path, flags, 0o600), "ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def kill_processes_of_uid(uid: int) -> int:
    """SIGKILL every living process whose real uid is ``uid``; return how many were killed."""
    return kill_processes_of_uids(frozenset({uid}))


def kill_processes_of_uids(uids: frozenset[int]) -> int:
    """SIGKILL every living process whose real uid is in ``uids``, in one pass over /proc.

    The real uid is what a job cannot shed (a setuid program it runs keeps it). Each kill goes
    through a pidfd opened before the uid is checked, so a pid reused in between is never hit.
    """
    if uids & {0, os.getuid()}:
        raise ValueError("refusing to kill every process of root or of this worker")
    killed: set[int] = set()
    for _ in range(KILL_ROUNDS):
        found = False
        for pid in _pids():
            if _kill_if_owned(pid, uids):
                found = True
                killed.add(pid)
        if not found:
            break
        time.sleep(KILL_ROUND_PAUSE_SECONDS)
    return len(killed)


class UidSweeper:
    """Returns finished attempts' uids to the pool once nothing runs under them any more.

    One scan of /proc costs about a millisecond per few hundred processes (2.3 ms at 100 on
    a 2-core VM); scanning once per ``SWEEP_SECONDS`` for every uid finished since, instead
    of once per attempt, keeps that off the hot path while still killing an escaped
    grandchild well within a second. A uid whose attempt was contained needs no scan: each
    process it ran was born in the attempt's cgroup, could not leave it, and none was left
    there at its end (``Outcome.contained``); it goes back at once.
    """

    def __init__(self, pool: UidPool) -> None:
        self._pool = pool
        self._finished: set[int] = set()
        self._wake = asyncio.Event()

    def finished(self, uid: int, *, contained: bool = False) -> None:
        if contained:
            self._pool.release(uid)
            return
        self._finished.add(uid)
        self._wake.set()

    async def sweep_forever(self) -> None:
        while True:
            await self._wake.wait()
            await self.sweep()
            await asyncio.sleep(SWEEP_SECONDS)

    async def sweep(self) -> None:
        self._wake.clear()
        uids, self._finished = frozenset(self._finished), set()
        if uids:
            await asyncio.to_thread(kill_processes_of_uids, uids)
            for uid in uids:
                self._pool.release(uid)


def default_python() -> str:
    """The interpreter for python jobs: the system one, which a sandboxed uid can read."""
    if Path(SYSTEM_PYTHON).exists():
        return SYSTEM_PYTHON
    found = shutil.which("python3")
    if found is None:
        raise RuntimeError("no python3 found for python jobs")
    return found


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _kill_if_owned(pid: int, uids: frozenset[int]) -> bool:
    """Kill ``pid`` if it is a living process of one of ``uids``, checked again once pinned
    by a pidfd."""
    if not _is_living_process_of(pid, uids):
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if not _is_living_process_of(pid, uids):
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def _is_living_process_of(pid: int, uids: frozenset[int]) -> bool:
    """True when ``pid``'s real uid is in ``uids`` and it has not exited (zombies are dead).

    Called for every process on the host, hence raw reads and no general parsing.
    """
    try:
        descriptor = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError):
        return False
    try:
        status = os.read(descriptor, STATUS_READ_BYTES)
    except ProcessLookupError:
        return False
    finally:
        os.close(descriptor)
    state = _field(status, b"State:")[:1]
    real_uid = _field(status, b"Uid:").split(maxsplit=1)[:1]
    return bool(real_uid) and int(real_uid[0]) in uids and state not in (b"Z", b"X")


def _field(status: bytes, name: bytes) -> bytes:
    start = status.find(b"\n" + name)
    if start < 0:
        return b""
    start += len(name) + 1
    end = status.find(b"\n", start)
    return status[start:end].strip()
