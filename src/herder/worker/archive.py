"""A user's archive (.tar, .tar.gz/.bz2/.xz or .zip, told apart by content) unpacked into a
workspace, refusing what could harm.

Refused before anything is written: a member that would land outside the workspace, a link or
device that could reach outside it, more entries than the disk holds files, more bytes than
it has room for, and more than ``MAX_RATIO`` times the archive's own size (a zip bomb). A zip
declares its sizes and can lie: the copy counts what it writes and stops at the same bound,
and at what each member declared. Nothing inside is unpacked again: an archive in an archive
stays a file.

Run as ``python -m herder.worker.archive``, it is the child that unpacks inside an attempt
(``unpacker.py``): it shuts itself in before it reads the archive (``main``). Only the standard
library, imported at once: nothing more can be imported in the chroot.
"""

from __future__ import annotations

import argparse
import bz2
import ctypes
import encodings.cp437  # noqa: F401  zip names in the old encoding; imported before a chroot
import errno
import gzip
import io
import lzma
import os
import resource
import signal
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

REFUSED, DISK_FULL, OUT_OF_MEMORY = 3, 4, 5  # why it stopped: the child's exit status
MAX_RATIO = 100  # expanded : compressed, for the whole archive and for each zip member
RATIO_FLOOR_BYTES = 1024 * 1024  # below this, a high ratio is harmless (a file of spaces)
COPY_CHUNK_BYTES = 1024 * 1024
TAR_BLOCK_BYTES = 512
MAX_HEADER_BYTES = 8 * 1024 * 1024  # one read of tar headers (pax, long names): never a bomb
DECOMPRESSORS: tuple[tuple[bytes, Callable[[IO[bytes]], io.BufferedIOBase]], ...] = (
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw)),
    (b"BZh", bz2.BZ2File),
    (b"\xfd7zXZ\x00", lzma.LZMAFile),
)

_TAR_REFUSALS: dict[type[tarfile.FilterError], str] = {
    tarfile.AbsolutePathError: "has an absolute path",
    tarfile.OutsideDestinationError: "would land outside the workspace",
    tarfile.SpecialFileError: "is a device or other special file",
    tarfile.AbsoluteLinkError: "is a link to an absolute path",
    tarfile.LinkOutsideDestinationError: "is a link that leads outside the workspace",
}
Stream = IO[bytes] | io.BufferedIOBase
_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, gzip.BadGzipFile,
            lzma.LZMAError, NotImplementedError, RuntimeError)  # fmt: skip


class ArchiveRefused(ValueError):
    """An archive that is not unpacked, or not all; the message says why, for its user."""


@dataclass(frozen=True)
class Bound:
    """What an archive may unpack to: the room on the attempt's disk."""

    max_bytes: int
    max_entries: int  # files, directories and links: the disk's free inodes
    max_ratio: int = MAX_RATIO

    def expanded_bytes(self, archive_bytes: int) -> int:
        """The most it may expand to: the room, and no more than the ratio allows."""
        return min(self.max_bytes, max(RATIO_FLOOR_BYTES, self.max_ratio * archive_bytes))

    def check_total(self, total: int, archive_bytes: int) -> None:
        """``total``: what the members seen so far declare."""
        if total > self.max_bytes:
            raise ArchiveRefused(
                f"unpacks to at least {total} bytes, more than the {self.max_bytes} bytes "
                "free on the attempt's disk (its disk_mb)"
            )
        if total > self.expanded_bytes(archive_bytes):
            raise ArchiveRefused(
                f"unpacks to at least {total} bytes from {archive_bytes}, more than "
                f"{self.max_ratio} times its size: refused as a zip bomb"
            )

    def check_entries(self, entries: int) -> None:
        if entries > self.max_entries:
            raise ArchiveRefused(
                f"has more than {self.max_entries} entries, "
                "more files than the attempt's disk holds"
            )


def try_unpack(workspace: Path, archive: IO[bytes], bound: Bound) -> tuple[int, str]:
    """``unpack``, and why it stopped: 0, or a status above with what a user should read."""
    try:
        unpack(workspace, archive, bound)
    except ArchiveRefused as refused:
        return REFUSED, str(refused)
    except MemoryError:
        return OUT_OF_MEMORY, ""
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return DISK_FULL, ""
        if error.errno == errno.ENOMEM:
            return OUT_OF_MEMORY, ""
        return REFUSED, f"could not unpack: {error}"
    return 0, ""


def unpack(workspace: Path, archive: IO[bytes], bound: Bound) -> None:
    """Unpack ``archive`` (a seekable file) into ``workspace``; ``ArchiveRefused`` when it is
    corrupt or anything in it is refused (then nothing is written, unless a zip lied about
    its sizes: the copy stops there)."""
    size = os.fstat(archive.fileno()).st_size
    head = archive.read(8)
    archive.seek(0)
    try:
        opener = next((opener for magic, opener in DECOMPRESSORS if head.startswith(magic)), None)
        if opener is not None:
            _unpack_tar(workspace, opener(archive), size, bound)
        elif _is_tar(archive):
            _unpack_tar(workspace, archive, size, bound)
        elif zipfile.is_zipfile(archive):
            _unpack_zip(workspace, archive, size, bound)
        else:
            raise ArchiveRefused("not a .tar, .tar.gz or .zip")
    except _CORRUPT as exc:
        raise ArchiveRefused(f"not a valid .tar, .tar.gz or .zip: {exc}") from exc


def _is_tar(archive: IO[bytes]) -> bool:
    archive.seek(0)
    try:
        return tarfile.is_tarfile(archive)
    finally:
        archive.seek(0)


def _unpack_tar(workspace: Path, stream: Stream, size: int, bound: Bound) -> None:
    # tar's headers count too: a block per entry, and pax or long-name headers
    limit = bound.expanded_bytes(size) + (bound.max_entries + 2) * 4 * TAR_BLOCK_BYTES
    with tarfile.open(fileobj=BoundedStream(stream, limit), mode="r:") as archive:
        total = 0
        for entries, member in enumerate(archive, start=1):  # headers only: data is skipped
            bound.check_entries(entries)
            check_tar_member(member, workspace)
            total += member.size if member.isreg() else 0
            bound.check_total(total, size)
        archive.extractall(workspace, filter="data")


def check_tar_member(member: tarfile.TarInfo, workspace: Path) -> None:
    """Refuse what the "data" filter refuses, and absolute names, which it would only strip."""
    if member.name.startswith("/"):
        raise ArchiveRefused(f"member {member.name!r} has an absolute path")
    try:
        tarfile.data_filter(member, str(workspace))
    except tarfile.FilterError as exc:
        why = _TAR_REFUSALS.get(type(exc), f"is refused ({type(exc).__name__})")
        raise ArchiveRefused(f"member {member.name!r} {why}") from exc


class BoundedStream(io.RawIOBase):
    """A tar stream (decompressed) that refuses to go past ``limit`` bytes, or to read one
    huge header at once: tarfile reads a pax header whole, whatever size it declares."""

    def __init__(self, stream: Stream, limit: int) -> None:
        super().__init__()
        self._stream, self._limit = stream, limit

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._stream.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._check(offset)
        return self._stream.seek(offset, whence)

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_HEADER_BYTES:
            raise ArchiveRefused(f"has a header larger than {MAX_HEADER_BYTES} bytes")
        self._check(self._stream.tell() + size)
        return self._stream.read(size)

    def _check(self, position: int) -> None:
        if position > self._limit:
            raise ArchiveRefused(f"unpacks to more than {self._limit} bytes of tar")


def _unpack_zip(workspace: Path, archive: IO[bytes], size: int, bound: Bound) -> None:
    with zipfile.ZipFile(archive) as zipped:
        members = zipped.infolist()
        bound.check_entries(len(members))
        targets = [_zip_target(member, workspace) for member in members]
        bound.check_total(sum(member.file_size for member in members), size)
        for member in members:
            _check_zip_ratio(member, bound.max_ratio)
        for member, target in zip(members, targets, strict=True):
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(member) as source, target.open("wb") as sink:
                _copy_bounded(source, sink, member.file_size, member.filename)
            target.chmod(0o755 if (member.external_attr >> 16) & 0o111 else 0o644)


def _check_zip_ratio(member: zipfile.ZipInfo, max_ratio: int) -> None:
    if member.file_size > max(RATIO_FLOOR_BYTES, max_ratio * member.compress_size):
        raise ArchiveRefused(
            f"member {member.filename!r} expands more than {max_ratio} times "
            f"({member.compress_size} to {member.file_size} bytes): refused as a zip bomb"
        )


def _zip_target(member: zipfile.ZipInfo, workspace: Path) -> Path:
    """Where a member goes, by its name alone: a zip makes no links (refused) in a workspace
    that starts empty, so no path in it leads elsewhere. Nothing is resolved: a sandboxed
    workspace is reached through a descriptor (``disk.py``), its real path is not the host's."""
    if stat.S_ISLNK(member.external_attr >> 16):
        raise ArchiveRefused(f"member {member.filename!r} is a symbolic link")
    name = os.path.normpath(member.filename)
    above = os.path.isabs(name) or name == ".." or name.startswith("../")
    if above or (name == "." and not member.is_dir()):
        raise ArchiveRefused(f"member {member.filename!r} would land outside the workspace")
    return workspace / name


def _copy_bounded(source: IO[bytes], sink: IO[bytes], most: int, name: str) -> None:
    """Copy at most ``most`` bytes, what the member declared: the total of those is bounded,
    and a zip's declarations can lie."""
    written = 0
    while chunk := source.read(min(COPY_CHUNK_BYTES, most - written + 1)):
        written += len(chunk)
        if written > most:
            raise ArchiveRefused(f"member {name!r} holds more than it declares")
        sink.write(chunk)


# --- the child that unpacks inside an attempt -----------------------------------------------

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


def main(arguments: list[str]) -> int:
    """Enter the attempt's cgroups and shut itself in (``shut_in``), then unpack stdin."""
    parser = argparse.ArgumentParser(prog="python -m herder.worker.archive")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--disk", type=int, required=True)  # the attempt's disk, passed open
    parser.add_argument("--workspace", required=True)  # its directory on the disk
    parser.add_argument("--enter", type=int, action="append", default=[])  # its cgroups' files
    parser.add_argument("--memory", type=int)  # RLIMIT_DATA, where there are no cgroups
    parser.add_argument("--parent", type=int, required=True)  # the worker: it dies with it
    options = parser.parse_args(arguments)
    for entrance in options.enter:  # first: everything from here on is the attempt's
        os.write(entrance, b"0")
        os.close(entrance)
    shut_in(options.disk, options.uid, options.memory, options.parent)
    workspace = Path("/", options.workspace)
    room = os.statvfs(workspace)
    with open(0, "rb", closefd=False) as archive:
        bound = Bound(room.f_bavail * room.f_frsize, room.f_favail)
        status, why = try_unpack(workspace, archive, bound)
    if why:
        print(why, file=sys.stderr)
    return status


def shut_in(disk: int, uid: int, memory_bytes: int | None, parent: int) -> None:
    """The attempt's disk as its root, its uid, no way back: no file of the host can be
    reached from here. (The workspace is not the root: there, a link to ``..`` would lead
    nowhere, and be let through, to lead out of /workspace when the job runs.) It dies
    with ``parent``, the worker: set last, as a change of uid clears it."""
    os.chroot(f"/proc/self/fd/{disk}")
    os.chdir("/")
    os.close(disk)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    die_with(parent)


def die_with(parent: int) -> None:
    """Be killed when ``parent`` (the worker that started this child) ends, however it
    ends: nothing of an attempt outlives its worker, nor holds its disk. Gone already (a
    child of pid 1 or a subreaper now), this child ends at once."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(REFUSED)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
