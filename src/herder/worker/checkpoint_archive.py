"""A checkpoint directory as a gzip'd tar, packed and unpacked as the attempt.

Packed (``pack``): its regular files, directories and symbolic links (stored as links, never
followed), each with its permission bits and modification time, no owner; devices, fifos,
sockets and links that lead out of the directory (a restore would refuse them) are skipped.
Before a byte is written, the apparent size of its regular files (a sparse file counts its
full size) is bounded by the job's ``checkpoint_mb``: past it nothing is packed. Saving holds
the attempt's end, so speed comes first: gzip at level ``GZIP_LEVEL``, the fastest, except for
a file whose first ``PROBE_BYTES`` would not shrink by a tenth (weights, already compressed
data), which is stored (level 0: ten times faster, a few percent larger). Each level change
starts a new gzip member; gzip readers join members (RFC 1952), so it is one .tar.gz.

Unpacked (``unpack``): only regular files, directories and links that stay inside, each
checked before anything is written (``archive.check_tar_member``, tar's "data" filter: no
absolute or ``..`` name, no link leading out, no setuid, setgid or sticky bit); a hard link,
device or fifo refuses the whole checkpoint. What the members declare is bounded by
``checkpoint_mb`` and the room on the attempt's disk before anything is expanded, and the
decompressed stream by the same bound (a gzip bomb stops there).

The job runs while it packs, and may swap what was listed: every directory and file is
opened without following a link and without waiting (``O_NOFOLLOW|O_NONBLOCK``: a fifo
swapped in opens at once), directories are read through the descriptors opened, and each
file's descriptor is checked (``fstat``) before a byte of it is read: no longer a regular
file, it refuses the save. Another regular file renamed into place since is saved whole (a
job that writes a file whole and renames it gets the old version or the new one), within
``checkpoint_mb``; the file listed, grown since, is cut at the size that was bounded.

Run as ``python -m herder.worker.checkpoint_archive pack|unpack``, it is the child that does
either for an attempt (``checkpoints.py``), killed by the worker past its deadline and dying
with the worker (``archive.die_with``). Sandboxed, it enters the attempt's cgroups and shuts
itself in its disk as its uid (``archive.shut_in``) before it reads a byte: chrooted there it
can reach only the attempt's own files, so a link the job swaps in while it packs leads
nowhere else. Only the standard library and ``archive.py``, imported at once.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import io
import os
import resource
import stat
import struct
import sys
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from herder.worker.archive import (
    DISK_FULL,
    OUT_OF_MEMORY,
    REFUSED,
    TAR_BLOCK_BYTES,
    ArchiveRefused,
    BoundedStream,
    check_tar_member,
    die_with,
    shut_in,
)

GZIP_LEVEL = 1  # the fastest that compresses
STORED = 0
PROBE_BYTES = 64 * 1024  # of a file, compressed to choose its level
WORTH_COMPRESSING = 0.9  # the probe must shrink to this fraction, or the file is stored
GZIP_MAGIC = b"\x1f\x8b"
GZIP_HEADER = GZIP_MAGIC + b"\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no time
COPY_CHUNK_BYTES = 1024 * 1024
MIB = 1024 * 1024
# What the packer opens: never through a link, never waiting (a fifo or device answers at
# once, and its descriptor is then refused for not being the file listed).
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
DIRECTORY_FLAGS = FILE_FLAGS | os.O_DIRECTORY


def pack(directory: Path, sink: IO[bytes], max_bytes: int) -> None:
    """Write ``directory``'s content to ``sink`` as a gzip'd tar; ``ArchiveRefused``, before
    anything is written, when its regular files hold more than ``max_bytes``, and part way
    when one of them is no longer a regular file (the job swapped in a fifo, say)."""
    root = os.open(directory, DIRECTORY_FLAGS)
    try:
        members = list(_walk(root, ""))
        total = sum(item.info.st_size for item in members if stat.S_ISREG(item.info.st_mode))
        if total > max_bytes:
            raise ArchiveRefused(
                f"the checkpoint directory holds {total} bytes, more than its checkpoint_mb "
                f"({max_bytes // MIB} MiB)"
            )
        room = max_bytes - total  # for files renamed into place since, larger than listed
        zipped = _GzipMembers(sink)
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for listed in members:
                room -= _add(archive, zipped, root, listed, room, max_bytes)
        zipped.finish()
    finally:
        os.close(root)


@dataclass(frozen=True)
class _Listed:
    """What the listing saw of one member: packed as that, or not at all."""

    name: str
    info: os.stat_result
    link: str | None = None  # a link's target, read once


class _GzipMembers(io.RawIOBase):
    """A gzip stream of members, each at the level set when it started."""

    def __init__(self, sink: IO[bytes]) -> None:
        super().__init__()
        self._sink = sink
        self._written = 0
        self._level = GZIP_LEVEL  # for what is written next
        self._member: Any = None  # zlib's compressor of the current member
        self._member_level = self._crc = self._size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def set_level(self, level: int) -> None:
        self._level = level

    def write(self, data: Any) -> int:
        if self._member is None or self._member_level != self._level:
            self.finish()
            self._sink.write(GZIP_HEADER)
            self._member = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
            self._member_level, self._crc, self._size = self._level, 0, 0
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._written += len(data)
        self._sink.write(self._member.compress(data))
        return len(data)

    def finish(self) -> None:
        """End the current member, if any."""
        if self._member is not None:
            self._sink.write(self._member.flush())
            self._sink.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
            self._member = None


def _walk(parent: int, prefix: str) -> Iterator[_Listed]:
    """What is saved, parents first, never through a link: each directory is read through
    the descriptor it was opened as (a directory, never a link, or the save is refused)."""
    with os.scandir(parent) as entries:
        for entry in sorted(entries, key=lambda entry: entry.name):
            info = entry.stat(follow_symlinks=False)
            name = f"{prefix}{entry.name}"
            if stat.S_ISDIR(info.st_mode):
                yield _Listed(name, info)
                inner = _open_listed(parent, entry.name, DIRECTORY_FLAGS)
                try:
                    yield from _walk(inner, f"{name}/")
                finally:
                    os.close(inner)
            elif stat.S_ISREG(info.st_mode):
                yield _Listed(name, info)
            elif stat.S_ISLNK(info.st_mode):
                target = os.readlink(entry.name, dir_fd=parent)
                if _stays_inside(name, target):
                    yield _Listed(name, info, target)


def _open_listed(root: int, name: str, flags: int) -> int:
    """Open what was listed as ``name`` beneath ``root``, one component at a time, never
    waiting nor following a link: what the job swapped in since (a link, a fifo where a
    directory was) refuses the save."""
    *parents, last = name.split("/")
    at = root
    try:
        for part in parents:
            inner = os.open(part, DIRECTORY_FLAGS, dir_fd=at)
            if at != root:
                os.close(at)
            at = inner
        return os.open(last, flags, dir_fd=at)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise
        raise ArchiveRefused(_changed(name)) from error
    finally:
        if at != root:
            os.close(at)


def _changed(name: str) -> str:
    return (
        f"{name!r} changed while it was packed (no longer the file or directory listed: a "
        "job should not swap what is in its checkpoint directory for a fifo, a link or a "
        "device while a save is under way)"
    )


def _stays_inside(name: str, target: str) -> bool:
    """Whether a link named ``name`` leads to ``target`` inside the directory, by its words
    alone (as tar's "data" filter judges it on the way back)."""
    resolved = os.path.normpath(os.path.join(os.path.dirname(name), target))
    return not os.path.isabs(target) and resolved != ".." and not resolved.startswith("../")


def _add(
    archive: tarfile.TarFile,
    zipped: _GzipMembers,
    root: int,
    listed: _Listed,
    room: int,
    max_bytes: int,
) -> int:
    """Add one member; how many bytes more than listed it took of ``room``."""
    zipped.set_level(GZIP_LEVEL)
    member = tarfile.TarInfo(listed.name)
    member.mode = stat.S_IMODE(listed.info.st_mode) & 0o777
    member.mtime = int(listed.info.st_mtime)
    if stat.S_ISDIR(listed.info.st_mode):
        member.type = tarfile.DIRTYPE
        archive.addfile(member)
        return 0
    if listed.link is not None:
        member.type, member.linkname = tarfile.SYMTYPE, listed.link
        archive.addfile(member)
        return 0
    # Never blocks: a fifo swapped in since opens at once, and its descriptor is refused.
    descriptor = _open_listed(root, listed.name, FILE_FLAGS)
    with open(descriptor, "rb") as source:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            raise ArchiveRefused(_changed(listed.name))
        member.size = listed.info.st_size  # the file listed: what was bounded (if it grew, cut)
        if (found.st_dev, found.st_ino) != (listed.info.st_dev, listed.info.st_ino):
            member.size = found.st_size  # another, renamed into place: whole, if it fits
            member.mode, member.mtime = stat.S_IMODE(found.st_mode) & 0o777, int(found.st_mtime)
            if member.size - listed.info.st_size > room:
                raise ArchiveRefused(
                    f"{listed.name!r} grew past the checkpoint_mb ({max_bytes // MIB} MiB) "
                    "while it was packed"
                )
        zipped.set_level(_level_for(source))
        try:
            archive.addfile(member, source)
        except OSError as error:
            if error.errno is not None:
                raise
            raise ArchiveRefused(f"{listed.name!r} shrank while it was packed") from error
    return max(0, member.size - listed.info.st_size)


def _level_for(source: IO[bytes]) -> int:
    """Stored when its start would not shrink by a tenth; small files are compressed."""
    probe = source.read(PROBE_BYTES)
    source.seek(0)
    if len(probe) < PROBE_BYTES:
        return GZIP_LEVEL
    worth = len(zlib.compress(probe, GZIP_LEVEL)) <= WORTH_COMPRESSING * len(probe)
    return GZIP_LEVEL if worth else STORED


def unpack(directory: Path, archive: IO[bytes], max_bytes: int, max_entries: int) -> None:
    """Unpack ``archive`` (a seekable gzip'd tar) into ``directory``; ``ArchiveRefused``,
    before anything is written, when it is corrupt or anything in it is refused."""
    if archive.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
        raise ArchiveRefused("not a gzip'd tar")
    archive.seek(0)
    limit = max_bytes + (max_entries + 2) * 4 * TAR_BLOCK_BYTES  # headers count too
    stream = BoundedStream(gzip.GzipFile(fileobj=archive), limit)
    try:
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            total = 0
            for entries, member in enumerate(tar, start=1):  # headers only: data is skipped
                if entries > max_entries:
                    raise ArchiveRefused(f"has more than {max_entries} entries")
                if not (member.isreg() or member.isdir() or member.issym()):
                    raise ArchiveRefused(
                        f"member {member.name!r} is neither a file, a directory nor a symbolic link"
                    )
                check_tar_member(member, directory)
                total += member.size if member.isreg() else 0
                if total > max_bytes:
                    raise ArchiveRefused(
                        f"unpacks to at least {total} bytes, more than the {max_bytes} bytes "
                        "its checkpoint_mb and the attempt's disk allow"
                    )
            tar.extractall(directory, filter="data")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveRefused(f"not a valid gzip'd tar: {exc}") from exc


def status_of(error: BaseException) -> tuple[int, str]:
    """The child's exit status for ``error``, and what a user should read."""
    if isinstance(error, ArchiveRefused):
        return REFUSED, str(error)
    if isinstance(error, MemoryError):
        return OUT_OF_MEMORY, ""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return DISK_FULL, ""
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return OUT_OF_MEMORY, ""
    return REFUSED, f"{error}"


# --- the child that packs or unpacks inside an attempt --------------------------------------


def main(arguments: list[str]) -> int:
    """Enter the attempt's cgroups, shut itself in (sandboxed: ``--disk``), die with the
    worker, then pack the directory to stdout (then remove the job's request, as the job)
    or unpack stdin into it."""
    parser = argparse.ArgumentParser(prog="python -m herder.worker.checkpoint_archive")
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("--parent", type=int, required=True)  # the worker: it dies with it
    parser.add_argument("--uid", type=int)  # sandboxed: the attempt's
    parser.add_argument("--disk", type=int)  # sandboxed: the attempt's disk, passed open
    parser.add_argument("--directory", required=True)  # the checkpoint directory (on the disk)
    parser.add_argument("--max-bytes", type=int, required=True)  # its checkpoint_mb
    parser.add_argument("--request")  # the job's request file (on the disk), removed on a pack
    parser.add_argument("--enter", type=int, action="append", default=[])  # its cgroups' files
    parser.add_argument("--memory", type=int)  # RLIMIT_DATA, where there are no cgroups
    options = parser.parse_args(arguments)
    for entrance in options.enter:  # first: everything from here on is the attempt's
        os.write(entrance, b"0")
        os.close(entrance)
    if options.disk is not None:
        shut_in(options.disk, options.uid, options.memory, options.parent)
    else:  # isolation none: the worker's user, the host's files
        die_with(options.parent)
        if options.memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (options.memory, options.memory))
    directory = Path("/", options.directory)
    try:
        if options.action == "pack":
            try:
                with open(1, "wb", closefd=False) as sink:
                    pack(directory, sink, options.max_bytes)
            finally:  # packed (or not): the job may write to the directory again
                if options.request is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(Path("/", options.request))
        else:
            room = os.statvfs(directory)
            with open(0, "rb", closefd=False) as source:
                bound = min(options.max_bytes, room.f_bavail * room.f_frsize)
                unpack(directory, source, bound, room.f_favail)
    except (ArchiveRefused, MemoryError, OSError) as error:
        status, why = status_of(error)
        if why:
            print(why, file=sys.stderr)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
