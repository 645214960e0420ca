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

Run as ``python -m herder.worker.checkpoint_archive pack|unpack``, it is the child that does
either inside an attempt (``checkpoints.py``): it enters the attempt's cgroups and shuts itself
in its disk as its uid (``archive.shut_in``) before it reads a byte. Chrooted there it can
reach only the attempt's own files, so a link the job swaps in while it packs leads nowhere
else. Only the standard library and ``archive.py``, imported at once.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import io
import os
import stat
import struct
import sys
import tarfile
import zlib
from collections.abc import Iterator
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


def pack(directory: Path, sink: IO[bytes], max_bytes: int) -> None:
    """Write ``directory``'s content to ``sink`` as a gzip'd tar; ``ArchiveRefused``, before
    anything is written, when its regular files hold more than ``max_bytes``."""
    members = list(_walk(directory, ""))
    total = sum(info.st_size for _, info in members if stat.S_ISREG(info.st_mode))
    if total > max_bytes:
        raise ArchiveRefused(
            f"the checkpoint directory holds {total} bytes, more than its checkpoint_mb "
            f"({max_bytes // MIB} MiB)"
        )
    zipped = _GzipMembers(sink)
    with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, info in members:
            _add(archive, zipped, directory / name, name, info)
    zipped.finish()


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


def _walk(directory: Path, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
    """What is saved, parents first, never through a link."""
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda entry: entry.name):
            info = entry.stat(follow_symlinks=False)
            name = f"{prefix}{entry.name}"
            if stat.S_ISDIR(info.st_mode):
                yield name, info
                yield from _walk(Path(entry.path), f"{name}/")
            elif stat.S_ISREG(info.st_mode) or (
                stat.S_ISLNK(info.st_mode) and _stays_inside(name, os.readlink(entry.path))
            ):
                yield name, info


def _stays_inside(name: str, target: str) -> bool:
    """Whether a link named ``name`` leads to ``target`` inside the directory, by its words
    alone (as tar's "data" filter judges it on the way back)."""
    resolved = os.path.normpath(os.path.join(os.path.dirname(name), target))
    return not os.path.isabs(target) and resolved != ".." and not resolved.startswith("../")


def _add(
    archive: tarfile.TarFile, zipped: _GzipMembers, path: Path, name: str, info: os.stat_result
) -> None:
    zipped.set_level(GZIP_LEVEL)
    member = tarfile.TarInfo(name)
    member.mode = stat.S_IMODE(info.st_mode) & 0o777
    member.mtime = int(info.st_mtime)
    if stat.S_ISDIR(info.st_mode):
        member.type = tarfile.DIRTYPE
        archive.addfile(member)
    elif stat.S_ISLNK(info.st_mode):
        member.type, member.linkname = tarfile.SYMTYPE, os.readlink(path)
        archive.addfile(member)
    else:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with open(descriptor, "rb") as source:
            member.size = info.st_size  # what was bounded: a file that grew since is cut there
            zipped.set_level(_level_for(source))
            archive.addfile(member, source)


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
    """Enter the attempt's cgroups, shut itself in, then pack the directory to stdout (then
    remove the job's request, as the job) or unpack stdin into it."""
    parser = argparse.ArgumentParser(prog="python -m herder.worker.checkpoint_archive")
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--disk", type=int, required=True)  # the attempt's disk, passed open
    parser.add_argument("--directory", required=True)  # the checkpoint directory on the disk
    parser.add_argument("--max-bytes", type=int, required=True)  # its checkpoint_mb
    parser.add_argument("--request")  # the job's request file on the disk, removed on a pack
    parser.add_argument("--enter", type=int, action="append", default=[])  # its cgroups' files
    parser.add_argument("--memory", type=int)  # RLIMIT_DATA, where there are no cgroups
    options = parser.parse_args(arguments)
    for entrance in options.enter:  # first: everything from here on is the attempt's
        os.write(entrance, b"0")
        os.close(entrance)
    shut_in(options.disk, options.uid, options.memory)
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
