"""The attempt's private working directory: made, given its program, removed; and the
command line that runs the job there.

Everything here blocks on the disk; the agent calls it through ``asyncio.to_thread``. An
archive is unpacked in the attempt's limits instead (``unpacker.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import assert_never

from herder.domain.images import ImageConfig, image_argv
from herder.domain.jobs import MAX_STOP_GRACE_SECONDS, JobSpec, Runtime
from herder.worker.limits import Limits
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import Sandbox
from herder.worker.statedir import UnsafeStateDirectory, secure_directory

COPY_CHUNK_BYTES = 1024 * 1024
HOST_MEMORY = Path("/dev/shm")  # the host's tmpfs; a sandboxed attempt's disk is a tmpfs too

log = logging.getLogger("herder.worker")


def workspace_root(state: Path) -> Path:
    """Where this worker's attempts at isolation none work: its own directory on the host's
    memory file system, else ``state/attempts``. An attempt's workspace and checkpoint
    directory are made and removed per attempt; on a journalled disk that is ~0.25 ms and,
    behind the database's fsyncs on the same disk, several (a third of a one-off's agent
    samples in the bench); on tmpfs ~20 us. Named by user and state directory, so a
    restarted worker finds what it left; one someone else made (or a symlink) is not used:
    the workspaces go on disk, with a warning."""
    if HOST_MEMORY.is_dir():  # never made: secure_directory would make a missing parent
        try:
            return secure_directory(memory_workspace_root(state))
        except (UnsafeStateDirectory, OSError) as error:
            log.warning("attempt workspaces go on disk, under %s: %s", state, error)
    return secure_directory(state / "attempts")


def memory_workspace_root(state: Path) -> Path:
    """The memory file system's directory for the worker of ``state`` (made by
    ``workspace_root``)."""
    digest = hashlib.sha256(os.fsencode(os.path.abspath(state))).hexdigest()[:16]
    return HOST_MEMORY / f"herder-{os.geteuid()}-{digest}"


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
    max_stop_grace_seconds: float = MAX_STOP_GRACE_SECONDS,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    name: str = "",
    image: ImageConfig | None = None,
) -> LaunchPlan:
    """How to start ``spec`` in ``workspace`` (the path the job sees); ``env`` is already the
    complete environment and a relative ``program`` is taken relative to the workspace. The
    job's stop grace is cut to ``max_stop_grace_seconds``, the worker operator's cap; a
    runtime image job's command line follows its ``image``'s config."""
    if program is not None and not program.is_absolute():
        program = workspace / program  # a bare name would be looked up in PATH instead
    return LaunchPlan(
        argv=_argv(spec, program, python, image),
        env=dict(env),
        cwd=workspace,
        timeout_seconds=timeout_seconds,
        stop_grace_seconds=min(spec.stop_grace_seconds, max_stop_grace_seconds),
        limits=limits,
        sandbox=sandbox,
        name=name,
    )


def _argv(spec: JobSpec, program: Path | None, python: str, image: ImageConfig | None) -> list[str]:
    match spec.runtime:
        case Runtime.SHELL | Runtime.ARCHIVE:
            if spec.command is None:
                raise ValueError(f"runtime {spec.runtime} needs a command")
            return ["/bin/sh", "-c", spec.command, "herder", *spec.args]
        case Runtime.PYTHON:
            return [python, str(_needed(program, spec.runtime)), *spec.args]
        case Runtime.EXECUTABLE:
            return [str(_needed(program, spec.runtime)), *spec.args]
        case Runtime.IMAGE:
            if image is None:
                raise ValueError("runtime image needs its image's config")
            return image_argv(image, spec.command, spec.args)
        case _:
            assert_never(spec.runtime)


def _needed(program: Path | None, runtime: Runtime) -> Path:
    if program is None:
        raise ValueError(f"runtime {runtime} needs its artifact placed in the workspace")
    return program


def _group(uid: int, gid: int | None) -> int:
    return gid if gid is not None else uid


def check_plain_name(name: str) -> None:
    """A single path component: no way to address anything but a child of the directory."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a plain file name")
