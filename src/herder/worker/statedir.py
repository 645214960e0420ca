"""The worker's own directories, where no job can reach or prepare anything.

A root worker keeps its uid locks, attempt disks, network namespaces and the sandbox launcher
under one root-owned state directory (``/var/lib/herder`` unless told otherwise). Jobs must not
be able to create, replace or redirect any of it: a directory a job made in /tmp before the
worker started, or a symlink it planted, would hand it another attempt's files. So every
directory is created without following links, and one that already exists is used only when it
is a real directory owned by the worker, not writable by anyone else, below parents that no one
else can rename things in.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from herder.domain.errors import HerderError

DEFAULT_ROOT_STATE_DIRECTORY = Path("/var/lib/herder")


class UnsafeStateDirectory(HerderError):
    """A state directory exists but someone other than the worker could change it."""


def secure_directory(path: Path, mode: int = 0o700) -> Path:
    """``path``, made (with its missing parents) or checked: owned by this process's user,
    writable by no one else, no symlink anywhere on the way; its mode is set to ``mode``."""
    path = Path(os.path.abspath(path))
    for parent in reversed(path.parents):
        _check_parent(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    info = os.lstat(path)
    _check_owned(path, info)
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(descriptor, mode)
    finally:
        os.close(descriptor)
    return path


def _check_parent(parent: Path) -> None:
    """A parent may be shared (/tmp) but not open to renames by others (sticky, or not
    writable by them), and may not be a symlink someone else controls."""
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        os.mkdir(parent, 0o755)
        info = os.lstat(parent)
    if stat.S_ISLNK(info.st_mode):
        if info.st_uid not in (0, os.geteuid()):
            raise UnsafeStateDirectory(f"{parent} is a symlink owned by uid {info.st_uid}")
        _check_parent(parent.parent / os.readlink(parent))
        return
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeStateDirectory(f"{parent} is not a directory")
    if info.st_uid not in (0, os.geteuid()):
        raise UnsafeStateDirectory(f"{parent} is owned by uid {info.st_uid}, not by root")
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable_by_others and not info.st_mode & stat.S_ISVTX:
        raise UnsafeStateDirectory(f"{parent} is writable by others (mode {info.st_mode:o})")


def _check_owned(path: Path, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeStateDirectory(f"{path} is a symlink; refusing to follow it")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeStateDirectory(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeStateDirectory(
            f"{path} belongs to uid {info.st_uid}, not to this worker (uid {os.geteuid()}): "
            "someone else made it: remove it (or, if it is in the worker's home, start the "
            "worker with another: herder worker --home DIR)"
        )
