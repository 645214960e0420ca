"""The attempt's private working directory: made, filled with its program, removed.

Everything here blocks on the disk; the agent calls it through ``asyncio.to_thread``. Archives
come from users, so unpacking refuses anything that would land outside the workspace, any link
or device that could reach outside it, and more data than ``max_bytes`` (zip bombs).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO, assert_never

from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec, Runtime
from herder.worker.limits import Limits
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import Sandbox

DEFAULT_MAX_UNPACKED_BYTES = 1024**3  # 1 GiB
COPY_CHUNK_BYTES = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"

_TAR_REFUSALS: dict[type[tarfile.FilterError], str] = {
    tarfile.AbsolutePathError: "has an absolute path",
    tarfile.OutsideDestinationError: "would land outside the workspace",
    tarfile.SpecialFileError: "is a device or other special file",
    tarfile.AbsoluteLinkError: "is a link to an absolute path",
    tarfile.LinkOutsideDestinationError: "is a link that leads outside the workspace",
}


def prepare_workspace(root: Path, attempt_id: str) -> Path:
    """Make ``root/attempt_id`` empty and mode 0700: an attempt's working directory when the
    worker runs it unsandboxed (isolation none); a sandboxed one works on its disk."""
    check_plain_name(attempt_id)
    workspace = root / attempt_id
    try:
        workspace.mkdir(mode=0o700)
    except FileNotFoundError:  # the first attempt: make the root
        root.mkdir(mode=0o711, parents=True, exist_ok=True)
        workspace.mkdir(mode=0o700)
    except FileExistsError:  # left over by a worker that crashed: never reuse its content
        remove_workspace(workspace)
        workspace.mkdir(mode=0o700)
    workspace.chmod(0o700)  # mkdir's mode passes through the umask
    return workspace


def place_artifact(
    workspace: Path,
    artifact_path: Path,
    filename: str,
    *,
    executable: bool,
    uid: int | None,
    gid: int | None,
) -> Path:
    """Copy a cached artifact in; a copy, so a job can never write into the cache."""
    check_plain_name(filename)
    target = workspace / filename
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(target, flags, 0o600)
    with artifact_path.open("rb") as source, open(descriptor, "wb") as sink:
        shutil.copyfileobj(source, sink, COPY_CHUNK_BYTES)
        os.fchmod(descriptor, 0o700 if executable else 0o600)
        if uid is not None:
            os.fchown(descriptor, uid, _group(uid, gid))
    return target


def unpack_archive(
    workspace: Path,
    archive_path: Path,
    uid: int | None,
    gid: int | None,
    *,
    max_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
) -> None:
    """Unpack a .tar(.gz) or .zip, told apart by content, into the workspace; ``Invalid`` when
    the archive is corrupt or anything in it is refused (nothing is unpacked then)."""
    with archive_path.open("rb") as archive:
        is_gzip = archive.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    if is_gzip or tarfile.is_tarfile(archive_path):
        _unpack_tar(workspace, archive_path, max_bytes)
    elif zipfile.is_zipfile(archive_path):
        _unpack_zip(workspace, archive_path, max_bytes)
    else:
        raise Invalid("the artifact is not a .tar, .tar.gz or .zip archive")
    if uid is not None:
        _chown_tree(workspace, uid, _group(uid, gid))


def remove_workspace(path: Path) -> None:
    """``rm -rf``, also through directories the job made read-only; never follows links."""
    with contextlib.suppress(OSError):  # most often empty, as `true` leaves it: one rmdir
        os.rmdir(path)  # (never through a symlink: rmdir refuses one)
        return
    if path.is_symlink():
        path.unlink()
        return
    if not path.exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():  # only a non-root worker meets permissions; open them up and retry
        path.chmod(stat.S_IRWXU)
        for directory, subdirectories, _ in os.walk(path):
            for name in subdirectories:
                child = Path(directory, name)
                if not child.is_symlink():
                    child.chmod(stat.S_IRWXU)
        shutil.rmtree(path)


def build_plan(
    spec: JobSpec,
    workspace: Path,
    program: Path | None,
    env: dict[str, str],
    python: str,
    timeout_seconds: float,
    *,
    kill_grace_seconds: float = 5.0,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    name: str = "",
) -> LaunchPlan:
    """How to start ``spec`` in ``workspace`` (the path the job sees); ``env`` is already the
    complete environment and a relative ``program`` is taken relative to the workspace."""
    if program is not None and not program.is_absolute():
        program = workspace / program  # a bare name would be looked up in PATH instead
    return LaunchPlan(
        argv=_argv(spec, program, python),
        env=dict(env),
        cwd=workspace,
        timeout_seconds=timeout_seconds,
        kill_grace_seconds=kill_grace_seconds,
        limits=limits,
        sandbox=sandbox,
        name=name,
    )


def _argv(spec: JobSpec, program: Path | None, python: str) -> list[str]:
    match spec.runtime:
        case Runtime.SHELL | Runtime.ARCHIVE:
            if spec.command is None:
                raise ValueError(f"runtime {spec.runtime} needs a command")
            return ["/bin/sh", "-c", spec.command, "herder", *spec.args]
        case Runtime.PYTHON:
            return [python, str(_needed(program, spec.runtime)), *spec.args]
        case Runtime.EXECUTABLE:
            return [str(_needed(program, spec.runtime)), *spec.args]
        case _:
            assert_never(spec.runtime)


def _needed(program: Path | None, runtime: Runtime) -> Path:
    if program is None:
        raise ValueError(f"runtime {runtime} needs its artifact placed in the workspace")
    return program


def _unpack_tar(workspace: Path, archive_path: Path, max_bytes: int) -> None:
    try:
        with tarfile.open(archive_path) as archive:
            total = 0
            for member in archive.getmembers():
                _check_tar_member(member, workspace)
                total += member.size if member.isreg() else 0
                _check_size(total, max_bytes)
            archive.extractall(workspace, filter="data")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise Invalid(f"the artifact is not a valid tar archive: {exc}") from exc


def _check_tar_member(member: tarfile.TarInfo, workspace: Path) -> None:
    """Refuse what the "data" filter refuses, and absolute names, which it would only strip."""
    if member.name.startswith("/"):
        raise Invalid(f"archive member {member.name!r} has an absolute path")
    try:
        tarfile.data_filter(member, str(workspace))
    except tarfile.FilterError as exc:
        why = _TAR_REFUSALS.get(type(exc), f"is refused ({type(exc).__name__})")
        raise Invalid(f"archive member {member.name!r} {why}") from exc


def _unpack_zip(workspace: Path, archive_path: Path, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(archive_path) as archive:
            members = archive.infolist()
            targets = [_zip_target(member, workspace) for member in members]
            _check_size(sum(member.file_size for member in members), max_bytes)
            written = 0
            for member, target in zip(members, targets, strict=True):
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("wb") as sink:
                    written = _copy_bounded(source, sink, written, max_bytes)
                target.chmod(0o755 if (member.external_attr >> 16) & 0o111 else 0o644)
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
        raise Invalid(f"the artifact is not a valid zip archive: {exc}") from exc


def _zip_target(member: zipfile.ZipInfo, workspace: Path) -> Path:
    """Where a member goes, by its name alone: a zip makes no links (refused) in a workspace
    that starts empty, so no path in it leads elsewhere. Nothing is resolved: a sandboxed
    workspace is reached through a descriptor (``disk.py``), its real path is not the host's."""
    if stat.S_ISLNK(member.external_attr >> 16):
        raise Invalid(f"archive member {member.filename!r} is a symbolic link")
    name = os.path.normpath(member.filename)
    above = os.path.isabs(name) or name == ".." or name.startswith("../")
    if above or (name == "." and not member.is_dir()):
        raise Invalid(f"archive member {member.filename!r} would land outside the workspace")
    return workspace / name


def _copy_bounded(source: IO[bytes], sink: IO[bytes], written: int, max_bytes: int) -> int:
    """Copy, counting against the limit as we go: sizes declared in a zip can lie."""
    while chunk := source.read(COPY_CHUNK_BYTES):
        written += len(chunk)
        _check_size(written, max_bytes)
        sink.write(chunk)
    return written


def _check_size(total: int, max_bytes: int) -> None:
    if total > max_bytes:
        raise Invalid(f"the archive unpacks to more than {max_bytes} bytes")


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories + files:
            os.chown(Path(directory, name), uid, gid, follow_symlinks=False)


def _group(uid: int, gid: int | None) -> int:
    return gid if gid is not None else uid


def check_plain_name(name: str) -> None:
    """A single path component: no way to address anything but a child of the directory."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a plain file name")
