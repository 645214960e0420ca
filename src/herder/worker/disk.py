"""An attempt's disk: one size-limited tmpfs holding everything the attempt can write.

    <attempts root>/<attempt id>/      tmpfs, size = the job's disk request
        work/      the workspace (the job's cwd and HOME), owned by the attempt's uid
        tmp/       its /tmp         (1777)
        var-tmp/   its /var/tmp     (1777)
        shm/       its /dev/shm     (1777)

One file system for all four makes the request one bound on every byte the job can write, and
the kernel enforces it: a write past it fails with ENOSPC. It is mounted by the worker before
the artifact is placed (so the artifact counts too) and unmounted when the attempt ends, which
frees every byte at once, whoever owned it. Its pages are memory: they count toward the
attempt's memory cgroup like any file it writes (docs/isolation.md says what follows).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

MS_NOSUID = 0x2
MS_NODEV = 0x4
MNT_DETACH = 0x2
INODES_PER_MIB = 256  # one per 4 KiB: many small files, never an inode bomb
MIB = 1024 * 1024

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass(frozen=True)
class AttemptDisk:
    root: Path  # the mount point on the worker's host
    size_bytes: int

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def var_tmp(self) -> Path:
        return self.root / "var-tmp"

    @property
    def shm(self) -> Path:
        return self.root / "shm"

    def is_full(self) -> bool:
        """Whether the attempt ran out of space or inodes (a few blocks' slack: a job that
        hit the limit usually leaves a partly written last block)."""
        try:
            usage = os.statvfs(self.root)
        except OSError:
            return False
        return usage.f_bavail * usage.f_frsize < 64 * 1024 or usage.f_favail == 0


def mount_disk(root: Path, size_bytes: int, uid: int) -> AttemptDisk:
    """Make ``root`` a fresh tmpfs of ``size_bytes`` with the attempt's directories."""
    root.mkdir(mode=0o700)
    inodes = max(1024, size_bytes // MIB * INODES_PER_MIB)
    options = f"size={size_bytes},nr_inodes={inodes},mode=0711,uid=0,gid=0"
    _call(
        _libc.mount(b"tmpfs", os.fsencode(root), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()),
        root,
    )
    disk = AttemptDisk(root, size_bytes)
    try:
        disk.work.mkdir(mode=0o700)
        os.chown(disk.work, uid, uid)
        for shared in (disk.tmp, disk.var_tmp, disk.shm):
            shared.mkdir()
            shared.chmod(0o1777)
    except OSError:
        unmount_disk(disk)
        raise
    return disk


def unmount_disk(disk: AttemptDisk) -> None:
    """Free every byte of it; idempotent, and also for a crashed worker's leftovers."""
    if os.path.ismount(disk.root):
        _call(_libc.umount2(os.fsencode(disk.root), MNT_DETACH), disk.root)
    if disk.root.exists():
        disk.root.rmdir()


def _call(result: int, path: Path) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(path))
