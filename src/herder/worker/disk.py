"""An attempt's disk: one size-limited tmpfs holding everything the attempt can write; and the
other mounts the worker makes for an attempt, all attached nowhere.

    (a detached tmpfs, size = the job's disk request; the worker holds it by a descriptor)
        work/      the workspace (the job's cwd and HOME), owned by the attempt's uid
        tmp/       its /tmp         (1777)
        var-tmp/   its /var/tmp     (1777)
        shm/       its /dev/shm     (1777)
        checkpoint/  its /checkpoint ($HERDER_CHECKPOINT_DIR), owned by the attempt's uid:
                   what is saved for the run's next attempt (checkpoints.py)

One file system for all five makes the request one bound on every byte the job can write, and
the kernel enforces it: a write past it fails with ENOSPC. Its pages are memory: they count
toward the attempt's memory cgroup like any file it writes (docs/isolation.md says what
follows).

The worker makes it with the mount API (``fsopen``, ``fsmount``) as a mount attached nowhere:
nothing appears in the host's mount table, nothing is made on the worker's own disk, and there
is nothing to unmount. The worker places the program through the descriptor before the attempt
starts; the launcher attaches the mount inside the attempt's own mount namespace (``sandbox.c``,
``--disk``). When the attempt's namespace is gone and the worker closes the descriptor, the
kernel frees every byte at once, whoever owned it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

WORK, TMP, VAR_TMP, SHM, CHECKPOINT = "work", "tmp", "var-tmp", "shm", "checkpoint"
INODES_PER_MIB = 256  # one per 4 KiB: many small files, never an inode bomb
MIB = 1024 * 1024
MNT_DETACH = 0x2
# The mount API's system calls have the same numbers on every architecture (asm-generic).
SYS_OPEN_TREE, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 428, 430, 431, 432
FSOPEN_CLOEXEC = FSMOUNT_CLOEXEC = OPEN_TREE_CLONE = 0x1
AT_FDCWD = -100
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE = 1, 6
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x2, 0x4

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass(frozen=True)
class AttemptDisk:
    fd: int  # the detached mount; the launcher is handed it
    size_bytes: int

    @property
    def root(self) -> Path:
        """The way into it for this process. A magic link, not a place on the host: its
        ``realpath`` is meaningless, so nothing here may be resolved."""
        return Path(f"/proc/self/fd/{self.fd}")

    @property
    def work(self) -> Path:
        return self.root / WORK

    def is_full(self) -> bool:
        """Whether the attempt ran out of space or inodes (a few blocks' slack: a job that
        hit the limit usually leaves a partly written last block)."""
        usage = os.statvfs(self.fd)
        return usage.f_bavail * usage.f_frsize < 64 * 1024 or usage.f_favail == 0


def open_disk(size_bytes: int, uid: int) -> AttemptDisk:
    """A fresh tmpfs of ``size_bytes`` with the attempt's directories, attached nowhere."""
    inodes = max(1024, size_bytes // MIB * INODES_PER_MIB)
    options = {"size": size_bytes, "nr_inodes": inodes, "mode": "0711"}  # root's: the worker's
    context = _call(_libc.syscall(SYS_FSOPEN, b"tmpfs", FSOPEN_CLOEXEC), "fsopen tmpfs")
    try:
        for key, value in options.items():
            text = str(value).encode()
            done = _libc.syscall(SYS_FSCONFIG, context, FSCONFIG_SET_STRING, key.encode(), text, 0)
            _call(done, f"tmpfs {key}={value}")
        _call(_libc.syscall(SYS_FSCONFIG, context, FSCONFIG_CMD_CREATE, None, None, 0), "tmpfs")
        attributes = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
        mount = _call(_libc.syscall(SYS_FSMOUNT, context, FSMOUNT_CLOEXEC, attributes), "fsmount")
    finally:
        os.close(context)
    disk = AttemptDisk(mount, size_bytes)
    try:
        for own in (WORK, CHECKPOINT):
            os.mkdir(own, 0o700, dir_fd=disk.fd)
            os.chown(own, uid, uid, dir_fd=disk.fd)
        for shared in (TMP, VAR_TMP, SHM):
            os.mkdir(shared, dir_fd=disk.fd)
            os.chmod(shared, 0o1777, dir_fd=disk.fd)
    except OSError:
        close_disk(disk)
        raise
    return disk


def close_disk(disk: AttemptDisk) -> None:
    """Let go of it: it is gone once the attempt's mount namespace is too."""
    os.close(disk.fd)


def detached_bind(path: Path) -> int:
    """A bind mount of ``path`` attached nowhere (``open_tree``), for the launcher to attach
    in an attempt's mount namespace, where the host's file system is out of sight."""
    flags = OPEN_TREE_CLONE | os.O_CLOEXEC
    return _call(_libc.syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(path), flags), str(path))


def detach_leftover(mount_point: Path) -> None:
    """Unmount a disk that an earlier version of the worker mounted on the host, then crashed."""
    _call(_libc.umount2(os.fsencode(mount_point), MNT_DETACH), str(mount_point))


def _call(result: int, what: str) -> int:
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), what)
    return result
