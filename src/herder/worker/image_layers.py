"""An image's layers stacked, safely, into one directory: the root file system its attempts
see (``images.py`` builds it once per image, in a directory of its own, then renames it into
the cache).

The worker does this as root, in its private state directory, which no job can reach: nothing
but this code writes there while it builds. Each member of each layer (a tar, plain or gzip)
is refused, and the image with it, when it:

    has an absolute name, or a ``..`` in it           could land outside the root
    goes through a symbolic link (an earlier member's)  could land anywhere the link leads
    is a device, a fifo or another special file       a node to the host's hardware
    is a hard link to anything but a regular file that this layer wrote before it
    would take the image past its ``Budget``          a small archive can expand to fill
                                                       the worker's disk, shared by all jobs:
                                                       every inode made counts (a directory
                                                       made for a member's path too), with
                                                       the blocks it takes, not its bytes
    is a whiteout of something that goes through a link

Set-uid and set-gid bits are dropped, and every file is root's, readable (and, where its
owner could, runnable) by anyone: an attempt runs as its own uid, not as the image's user,
on a read-only, nosuid mount. Symbolic links are made as they are (they are resolved inside
the attempt's root when it runs) and never followed here: parents are checked with ``lstat``
and files opened with ``O_NOFOLLOW``.

Whiteouts honour the OCI layer format: ``DIR/.wh.NAME`` removes ``NAME`` as the layers below
left it; ``DIR/.wh..wh..opq`` removes everything the layers below left in ``DIR``. What this
layer itself wrote stays, whatever order its members come in.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, cast

from herder.worker.archive import TAR_BLOCK_BYTES, ArchiveRefused, BoundedStream

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
COPY_CHUNK_BYTES = 1024 * 1024
MIB = 1024 * 1024
# The bound of one image's root: it lies on the worker's own disk, outside every attempt's
# limits and shared by all of them, so a 10 MB archive that expands without end would fill
# it for every job; this is about twice a full Python or JDK image.
MAX_IMAGE_BYTES = 2 * 1024 * MIB
MAX_IMAGE_ENTRIES = 200_000
# What an entry takes on disk beyond its data (ext4's): a directory's block, a file's last
# block rounded up, an inode. 199,000 empty directories are 0 bytes of data but 782 MiB here.
BLOCK_BYTES = 4096
INODE_BYTES = 256
DECOMPRESSION_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError, OSError)
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class LayerRefused(ValueError):
    """A layer that is not stacked; the message says which member and why."""


@dataclass
class Budget:
    """What one image may unpack to, in all its layers: inodes, and the disk they take."""

    max_bytes: int
    max_entries: int
    used_bytes: int = 0
    used_entries: int = 0

    def tar_room(self) -> int:
        """The most a layer's tar may be: the bytes left, and its headers (a block per
        entry left, and pax or long-name headers)."""
        entries = self.max_entries - self.used_entries + 2
        return self.max_bytes - self.used_bytes + entries * 4 * TAR_BLOCK_BYTES

    def spend(self, member: tarfile.TarInfo) -> None:
        """A member, charged as what it may make: a file's blocks, else one block."""
        blocks = -(-member.size // BLOCK_BYTES) if member.isreg() else 1
        self.charge(blocks * BLOCK_BYTES + INODE_BYTES)

    def charge(self, disk_bytes: int) -> None:
        """One inode more, taking ``disk_bytes``; ``LayerRefused`` past the bounds."""
        self.used_entries += 1
        self.used_bytes += disk_bytes
        if self.used_entries > self.max_entries:
            raise LayerRefused(f"the image has more than {self.max_entries} files and directories")
        if self.used_bytes > self.max_bytes:
            raise LayerRefused(f"the image unpacks to more than {self.max_bytes // MIB} MiB")


@dataclass
class _Layer:
    """What one layer wrote so far: whiteouts never remove it, hard links reach only it."""

    root: Path
    budget: Budget
    written: set[PurePosixPath] = field(default_factory=set)
    files: set[PurePosixPath] = field(default_factory=set)


def apply_layer(root: Path, layer: IO[bytes], budget: Budget) -> str:
    """Lay ``layer`` over what ``root`` holds; the sha256 of its uncompressed tar (its
    ``diff_id``, which the caller compares with the image config's).

    The layer is decompressed first, into an unnamed file beside ``root`` (bounded by what the
    budget has left), so that tarfile reads it with random access, through ``archive.py``'s
    ``BoundedStream``: no header is read whole past its bound (a pax header that declares
    gigabytes would otherwise be read into the worker's memory)."""
    head = layer.read(4)
    layer.seek(0)
    if head.startswith(ZSTD_MAGIC):
        raise LayerRefused("a zstd-compressed layer: save the image with gzip or no compression")
    source = cast(IO[bytes], gzip.GzipFile(fileobj=layer)) if head.startswith(GZIP_MAGIC) else layer
    limit = budget.tar_room()
    with tempfile.TemporaryFile(dir=root.parent) as plain:
        diff_id = _decompressed(source, plain, limit)
        plain.seek(0)
        state = _Layer(root, budget)
        try:
            with tarfile.open(fileobj=BoundedStream(plain, limit), mode="r:") as archive:
                for member in archive:
                    budget.spend(member)
                    _apply(state, archive, member)
        except (tarfile.TarError, EOFError, ArchiveRefused) as error:
            raise LayerRefused(f"not a valid layer: {error}") from error
    return diff_id


def _decompressed(source: IO[bytes], sink: IO[bytes], limit: int) -> str:
    """Copy at most ``limit`` bytes; their sha256."""
    hashed = hashlib.sha256()
    size = 0
    try:
        while chunk := source.read(COPY_CHUNK_BYTES):
            size += len(chunk)
            if size > limit:
                raise LayerRefused(f"the image unpacks to more than {limit // MIB} MiB of tar")
            hashed.update(chunk)
            sink.write(chunk)
    except DECOMPRESSION_ERRORS as error:
        if isinstance(error, OSError) and error.errno is not None:
            raise  # the worker's disk, not the layer
        raise LayerRefused(f"not a valid layer: {error}") from error
    return "sha256:" + hashed.hexdigest()


def member_path(name: str) -> PurePosixPath | None:
    """A member's path relative to the root, or None for the root itself; ``LayerRefused``
    for one that could land outside it."""
    if name.startswith("/"):
        raise LayerRefused(f"member {name!r} has an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise LayerRefused(f"member {name!r} has '..' in its path")
    if any("\0" in part for part in parts):
        raise LayerRefused(f"member {name!r} has a NUL in its path")
    return PurePosixPath(*parts) if parts else None


def _apply(state: _Layer, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    relative = member_path(member.name)
    if relative is None:
        return  # "./": the root is ours
    parent = _parent(state.root, relative, member.name, state.budget)
    name = relative.name
    if name == OPAQUE:
        _clear_lower(state, relative.parent, parent)
        return
    if name.startswith(WHITEOUT):
        hidden = name.removeprefix(WHITEOUT)
        if hidden in ("", ".", ".."):
            raise LayerRefused(f"member {member.name!r} is a whiteout of no single name")
        if relative.parent / hidden not in state.written:
            remove_path(parent / hidden)
        return
    target = parent / name
    if member.isdir():
        if not _is_directory(target):
            remove_path(target)
            target.mkdir(mode=0o755)
        target.chmod(_mode(member.mode))
    elif member.isreg():
        remove_path(target)
        source = archive.extractfile(member)
        assert source is not None  # a regular file has data
        _write(target, source, member)
        state.files.add(relative)
    elif member.issym():
        remove_path(target)
        os.symlink(member.linkname, target)
    elif member.islnk():
        linked = member_path(member.linkname)
        if linked is None or linked not in state.files:
            raise LayerRefused(
                f"member {member.name!r} is a hard link to {member.linkname!r}, not to a file "
                "this layer holds"
            )
        remove_path(target)
        os.link(_parent(state.root, linked, member.linkname, state.budget) / linked.name,
                target, follow_symlinks=False)  # fmt: skip
        state.files.add(relative)
    else:
        raise LayerRefused(f"member {member.name!r} is a device, fifo or other special file")
    state.written.add(relative)


def _parent(root: Path, relative: PurePosixPath, name: str, budget: Budget) -> Path:
    """The member's directory, made where missing (each one made charged to ``budget``: one
    member of a deep path makes thousands); never through a symbolic link."""
    directory = root
    for part in relative.parent.parts:
        directory = directory / part
        try:
            mode = directory.lstat().st_mode
        except FileNotFoundError:
            budget.charge(BLOCK_BYTES + INODE_BYTES)
            directory.mkdir(mode=0o755)
            continue
        if stat.S_ISLNK(mode):
            raise LayerRefused(f"member {name!r} goes through the symbolic link {part!r}")
        if not stat.S_ISDIR(mode):
            budget.charge(BLOCK_BYTES + INODE_BYTES)
            remove_path(directory)
            directory.mkdir(mode=0o755)
    return directory


def _clear_lower(state: _Layer, relative: PurePosixPath, directory: Path) -> None:
    """An opaque directory: all that lower layers left in it goes; this layer's stays."""
    for child in list(directory.iterdir()):
        child_relative = relative / child.name
        if child_relative not in state.written:
            remove_path(child)
        elif _is_directory(child):
            _clear_lower(state, child_relative, child)


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def remove_path(path: Path) -> None:
    """Whatever is at ``path``, gone; a link is removed, never followed."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def _mode(mode: int) -> int:
    """No set-uid or set-gid; whoever may read (run) it as its owner, anyone may."""
    permissions = mode & 0o1777
    owner = permissions & 0o500
    return permissions | owner >> 3 | owner >> 6


def _write(target: Path, source: IO[bytes], member: tarfile.TarInfo) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(target, flags, 0o600)
    with open(descriptor, "wb") as sink:
        shutil.copyfileobj(source, sink, COPY_CHUNK_BYTES)
        os.fchmod(descriptor, _mode(member.mode))
