"""An archive unpacked inside its attempt, never in the worker.

A sandboxed attempt's archive is unpacked by a child of the worker that, before it reads a
byte of the archive, enters the attempt's cgroups, shuts itself in the attempt's disk
(``chroot``) and becomes the attempt's uid (no groups, no_new_privs):

    worker   python -m herder.worker.archive --uid U --disk FD --workspace work
                 --parent PID [--enter FD]… [--memory BYTES]
             stdin: the archive, opened by the worker; the disk and cgroup files passed open
    child    enter the cgroups → chroot <disk> → drop to U → die with PID (the worker) →
             unpack into /work, bounded by the room left on its disk → exit 0, or a status
             that says why (``archive.py``)

What it expands to is charged to the attempt, as the files it writes there are memory (their
pages count toward its memory limit, as the job's own files do): a bomb meets the attempt's
memory, CPU and disk limits and fails the attempt with a reason, never the worker. A parser
bug that a hostile archive finds reaches nothing but the attempt's own disk.

At isolation none there is no uid, cgroup or disk to give the attempt: the worker unpacks in
its own process (``unpack_here``), bounded by the job's ``disk_mb``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from herder.domain.retry import DISK_FULL_REASON_PREFIX, OOM_REASON_PREFIX
from herder.worker import archive as archives
from herder.worker.archive import DISK_FULL, OUT_OF_MEMORY, REFUSED, Bound, try_unpack
from herder.worker.disk import INODES_PER_MIB, MIB, WORK, AttemptDisk
from herder.worker.limits import Confinement, Limits

REASON_CHARS = 1000


async def unpack_in_attempt(
    archive: Path,
    disk: AttemptDisk,
    uid: int,
    confinement: Confinement | None,
    limits: Limits,
    timeout_seconds: float,
    stop: asyncio.Event,
) -> str | None:
    """Unpack ``archive`` into the attempt's workspace as the attempt: why it could not, or
    None (also when ``stop`` was set: the caller sees it)."""
    passed: list[int] = []
    try:
        passed.append(os.open(archive, os.O_RDONLY | os.O_CLOEXEC))
        entrances = confinement.entrances() if confinement is not None else []
        argv = [sys.executable, "-P", "-m", archives.__name__]
        argv += ["--uid", str(uid), "--disk", str(disk.fd), "--workspace", WORK]
        argv += ["--parent", str(os.getpid())]  # it dies with the worker, if ever first
        for entrance in entrances:
            passed.append(os.open(entrance, os.O_WRONLY | os.O_CLOEXEC))
            argv += ["--enter", str(passed[-1])]
        if not entrances:  # no cgroup on this host: the rlimit the job gets too
            argv += ["--memory", str(limits.memory_bytes)]
        child = await asyncio.create_subprocess_exec(
            *argv,
            stdin=passed[0],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(disk.fd, *passed[1:]),
            cwd="/",
            start_new_session=True,
        )
    finally:
        for fd in passed:
            os.close(fd)
    ended = asyncio.ensure_future(child.communicate())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({ended, stopped}, timeout=timeout_seconds, return_when="FIRST_COMPLETED")
    finally:
        stopped.cancel()
        killed = not ended.done()
        if killed:
            child.kill()
        _, errors = await ended
    status = child.returncode
    if stop.is_set() or status == 0:
        return None
    if killed:
        return f"archive: still unpacking at the job's timeout of {timeout_seconds:g}s"
    if status == -signal.SIGKILL and confinement is not None and confinement.collect().oom_kills:
        status = OUT_OF_MEMORY  # the kernel's kill at the limit (collecting kills nothing more)
    if status is None or status < 0:
        name = signal.Signals(-status).name if status is not None else "a signal"
        return f"archive: the unpacker was killed by {name}"
    why = errors.decode(errors="replace").strip()
    return _reason(status, why.splitlines()[-1] if why else "", limits.memory_text, disk.size_bytes)


def unpack_here(workspace: Path, archive: Path, disk_mb: int) -> str | None:
    """At isolation none: unpack in this process, bounded by ``disk_mb``; why it could not."""
    bound = Bound(disk_mb * MIB, disk_mb * INODES_PER_MIB)
    with archive.open("rb") as source:
        status, why = try_unpack(workspace, source, bound)
    return _reason(status, why, "the worker's", disk_mb * MIB)


def _reason(status: int, why: str, memory: str, disk_bytes: int) -> str | None:
    """In a user's words, with the prefixes a retry policy knows (``domain.retry``)."""
    if status == 0:
        return None
    if status == OUT_OF_MEMORY:
        return f"{OOM_REASON_PREFIX}: the archive expands past its {memory} memory limit"
    if status == DISK_FULL:
        return f"{DISK_FULL_REASON_PREFIX}: the archive fills its {disk_bytes // MIB} MiB disk"
    if status == REFUSED:
        return f"archive: {why}"[:REASON_CHARS]
    return f"archive: could not unpack: {why or f'exit status {status}'}"[:REASON_CHARS]
