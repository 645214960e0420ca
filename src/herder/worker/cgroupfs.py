"""The cgroup file system: where the hierarchies are mounted, which cgroup a process is in,
and the few operations on cgroup directories and files the worker needs (made, written, read,
emptied by killing what is inside, removed). Both versions, v1 and v2, are handled here alike.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("herder.worker")

EMPTY_WAIT_SECONDS = 2.0  # how long removal waits for killed processes to leave
EMPTY_POLL_SECONDS = 0.005  # when the kernel has yet to see the last one leave
READ_BYTES = 64 * 1024  # enough for any file read here (cgroup.procs of one attempt)


@dataclass(frozen=True)
class CgroupMount:
    point: Path
    root: str  # the cgroup mounted at ``point`` (not "/" in some containers)
    version: int
    controllers: frozenset[str]  # v1: what this hierarchy holds; v2: empty (see the files)


def cgroup_mounts(mountinfo: str) -> list[CgroupMount]:
    """cgroup mounts from /proc/self/mountinfo: "id parent dev root point opts [tags] - type
    source super-opts", with spaces in paths written as octal escapes."""
    mounts = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, tail_parts = fields.split(), tail.split()
        if len(parts) < 5 or len(tail_parts) < 3 or tail_parts[0] not in ("cgroup", "cgroup2"):
            continue
        version = 2 if tail_parts[0] == "cgroup2" else 1
        options = frozenset(tail_parts[2].split(",")) if version == 1 else frozenset()
        point = Path(_unescape(parts[4]))
        mounts.append(CgroupMount(point, _unescape(parts[3]), version, options))
    return mounts


def cgroup_membership(proc_cgroup: str) -> dict[str, str]:
    """controller -> this process's cgroup path, from /proc/self/cgroup; "" is cgroup v2."""
    membership = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            membership[controller] = path
    return membership


def cgroup_directory(mount: CgroupMount, path: str) -> Path:
    """Where ``path`` is seen under ``mount`` (whose own root may be a deeper cgroup)."""
    root = mount.root.rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return mount.point / path.lstrip("/")


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal[1], 8)), text)


def enable(cgroup: Path, controllers: list[str]) -> None:
    enabled = read_words(cgroup / "cgroup.subtree_control")
    missing = [name for name in controllers if name not in enabled]
    if missing:
        write(cgroup / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))


def make(cgroup: Path) -> None:
    try:
        cgroup.mkdir()
    except FileExistsError:  # left by a worker that crashed: never reuse it
        remove(cgroup)
        cgroup.mkdir()


def write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, READ_BYTES).decode()
    finally:
        os.close(fd)


def read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def read_number(path: Path) -> int | None:
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_key(path: Path, key: str) -> int | None:
    """The value of ``key`` in a flat-keyed file such as memory.events."""
    try:
        lines = _read(path).splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def member_pids(cgroup: Path) -> list[int]:
    try:
        return [int(pid) for pid in _read(cgroup / "cgroup.procs").split()]
    except FileNotFoundError:
        return []


def kill_members(cgroup: Path) -> list[int]:
    """SIGKILL every process in ``cgroup``; return pidfds of those it was sent to, to wait on.

    Each pid is pinned by a pidfd, then checked to be a member still: a pid in the cgroup
    after that is a process of the attempt (only they are born there), never a reused one.
    v2's ``cgroup.kill`` also takes what they fork meanwhile.
    """
    pinned = {}
    for pid in member_pids(cgroup):
        with contextlib.suppress(ProcessLookupError):
            pinned[pid] = os.pidfd_open(pid)
    if not pinned:
        return []
    members = set(member_pids(cgroup))
    try:
        if (cgroup / "cgroup.kill").exists():
            write(cgroup / "cgroup.kill", "1")
        else:
            for pid in members & set(pinned):
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pinned[pid], signal.SIGKILL)
    except BaseException:
        close_all(list(pinned.values()))
        raise
    close_all([pidfd for pid, pidfd in pinned.items() if pid not in members])
    return [pidfd for pid, pidfd in pinned.items() if pid in members]


def _wait_for_exits(pidfds: list[int], deadline: float) -> None:
    """Until each process has exited (its pidfd turns readable: it has left its cgroups), or
    ``deadline``; closes the pidfds."""
    waiting = select.poll()
    for pidfd in pidfds:
        waiting.register(pidfd, select.POLLIN)
    left = set(pidfds)
    try:
        while left and (seconds := deadline - time.monotonic()) > 0:
            for pidfd, _ in waiting.poll(seconds * 1000):
                waiting.unregister(pidfd)
                left.discard(pidfd)
    finally:
        close_all(pidfds)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def try_remove(cgroup: Path) -> bool:
    """Remove ``cgroup`` if that needs no waiting, as when nothing is left inside: whether it
    is gone."""
    try:
        cgroup.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def remove(cgroup: Path) -> None:
    """Remove ``cgroup``: at once when it is empty, as it almost always is (the attempt's
    processes were killed at its end); else kill what is inside, child cgroups first, and wait
    for it to leave."""
    deadline = time.monotonic() + EMPTY_WAIT_SECONDS
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cannot remove cgroup %s yet: %s", cgroup, error.strerror)
                return
        clear(cgroup)
        pidfds = kill_members(cgroup)
        if pidfds:
            _wait_for_exits(pidfds, deadline)
        else:  # nothing to wait on: the kernel has yet to see the last one leave
            time.sleep(EMPTY_POLL_SECONDS)


def clear(parent: Path) -> None:
    """Remove every child cgroup of ``parent`` (the parent stays)."""
    try:
        with os.scandir(parent) as entries:
            children = [Path(entry) for entry in entries if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return
    for child in children:
        remove(child)
