"""One attempt's checkpoint directory: restored before the job starts, saved while it runs and
at its end, each save uploaded for the run's next attempt, wherever it runs.

    restore   assignment.checkpoint set (never on attempt 1): fetched to a private file in
              the worker's state, checked against its sha256, unpacked into the directory
    save      at the attempt's end, whatever the outcome, once its processes are gone and
              before its completion is reported (skipped when the directory is empty, or
              the attempt was dropped or lost); every checkpoint_interval_seconds while it
              runs; when the job creates the request file (polled each second; removed once
              the directory is packed, so a job may wait for that before it writes again)

Sandboxed, both are done by a child of the worker that is the attempt (its uid, cgroups,
chrooted into its disk: ``checkpoint_archive.py``, started as ``unpacker.py`` starts
``archive.py``): the worker never reads or writes the job's paths as root. At isolation none
a save is packed by a child too (as the worker's user), and a restore, before the job runs,
is unpacked in the worker's own process, with the same bounds. The packing child writes to a
pipe; the worker copies it, bounded, to a private file and uploads that. The child dies with
the worker, and is killed past ``packer_deadline`` (the save refused) or when the save is
cancelled: nothing of it outlives the attempt or holds its disk.

Saves of one attempt never overlap. A refused save keeps the run's previous checkpoint: at the
end it is told in the completion (``checkpoint_refused``), earlier in the attempt's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import httpx

from herder.domain.errors import HerderError
from herder.domain.models import CheckpointRef
from herder.worker import checkpoint_archive as packer
from herder.worker.archive import DISK_FULL, OUT_OF_MEMORY, ArchiveRefused
from herder.worker.connection import CheckpointGone, CheckpointRefused
from herder.worker.disk import CHECKPOINT, INODES_PER_MIB, MIB, WORK
from herder.worker.limits import Confinement
from herder.worker.sandbox import Sandbox

REQUEST_NAME = ".herder-checkpoint-request"  # in the workspace: the job touches it to ask
REQUEST_POLL_SECONDS = 1.0
# A save's packing is bounded in time, whatever the job does to its directory meanwhile:
# this, and this per MiB of its checkpoint_mb (a floor of 4 MiB/s on a loaded host; at
# gzip's fastest a save packs at tens of MiB/s). 1 GiB: a little under 5 minutes.
PACK_SECONDS = 30.0
PACK_SECONDS_PER_MIB = 0.25
COPY_CHUNK_BYTES = 1024 * 1024
REASON_CHARS = 1000


class CheckpointTransfer(Protocol):
    """The server's side of it: the worker's connection (``ServerConnection``)."""

    async def upload_checkpoint(self, attempt_id: str, attempt: int, archive: Path) -> None: ...

    async def download_checkpoint(
        self, attempt_id: str, attempt: int, ref: CheckpointRef, into: Path
    ) -> None: ...


@dataclass
class Checkpoints:
    """One attempt's checkpoint directory, as the worker reaches it (``directory``; the job's
    request file ``request``), bounded by ``max_bytes`` (its checkpoint_mb)."""

    attempt_id: str
    attempt: int
    transfer: CheckpointTransfer
    scratch: Path  # the worker's private directory for the archive on its way
    directory: Path
    request: Path
    max_bytes: int
    sandbox: Sandbox | None  # None at isolation none
    memory_bytes: int  # the job's: the child's RLIMIT_DATA, where there are no cgroups
    confinement: Confinement | None = None  # the attempt's cgroups, once they exist
    packer_seconds: float | None = None  # None: ``packer_deadline``'s bound from max_bytes
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)

    def is_empty(self) -> bool:
        """One scandir (through the disk's descriptor when sandboxed): a run that never
        writes a checkpoint pays nothing more. One the job made unreadable (or, at isolation
        none, removed) is not empty: its save says what is wrong."""
        try:
            with os.scandir(self.directory) as entries:
                return next(entries, None) is None
        except OSError:
            return False

    async def save(self) -> str | None:
        """Pack and upload the directory's content now: why it was not saved, or None."""
        async with self._saving:
            with self._scratch_file() as archive:
                try:
                    refused = await self._pack(archive)
                except OSError as error:  # the worker's own: its state, the child's start
                    return f"could not pack it: {error}"[:REASON_CHARS]
                if refused is not None:
                    return refused
                try:
                    await self.transfer.upload_checkpoint(self.attempt_id, self.attempt, archive)
                except CheckpointRefused as refusal:
                    return f"the server refused it: {refusal}"[:REASON_CHARS]
                except (HerderError, httpx.HTTPError, OSError) as error:
                    return f"could not upload it: {error}"[:REASON_CHARS]
        return None

    async def restore(self, ref: CheckpointRef) -> str | None:
        """Fetch the run's checkpoint and unpack it into the empty directory: why it could
        not, starting "checkpoint:" (the attempt then fails), or None. A checkpoint deleted
        since the claim named it leaves the directory empty: the attempt starts afresh, as
        the delete meant."""
        with self._scratch_file() as archive:
            try:
                await self.transfer.download_checkpoint(self.attempt_id, self.attempt, ref, archive)
            except CheckpointGone:
                return None
            except (HerderError, httpx.HTTPError, OSError, ValueError) as error:
                return _restore_failed(f"could not fetch it: {error}")
            try:
                why = await self._unpack(archive)
            except OSError as error:
                why = f"could not unpack it: {error}"
        return None if why is None else _restore_failed(why)

    @contextlib.contextmanager
    def _scratch_file(self) -> Iterator[Path]:
        descriptor, name = tempfile.mkstemp(prefix=f"{self.attempt_id}-", dir=self.scratch)
        os.close(descriptor)
        try:
            yield Path(name)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)

    async def _pack(self, archive: Path) -> str | None:
        """In a child, at either isolation: it can be killed at its deadline, as no thread
        can, and takes nothing of the worker's with it."""
        if self.sandbox is None:
            argv = self._packer_argv("pack", "--directory", str(self.directory))
            argv += ["--request", str(self.request)]
        else:
            argv = self._child_argv("pack", "--request", f"{WORK}/{REQUEST_NAME}")
        with archive.open("wb") as sink:
            return await self._run_packer(argv, asyncio.subprocess.DEVNULL, sink)

    async def _unpack(self, archive: Path) -> str | None:
        if self.sandbox is None:
            return await asyncio.to_thread(self._unpack_here, archive)
        with archive.open("rb") as source:
            return await self._run_packer(self._child_argv("unpack"), source.fileno(), None)

    def _unpack_here(self, archive: Path) -> str | None:
        try:
            with archive.open("rb") as source:
                entries = self.max_bytes // MIB * INODES_PER_MIB + INODES_PER_MIB
                packer.unpack(self.directory, source, self.max_bytes, entries)
        except (ArchiveRefused, MemoryError, OSError) as error:
            return _reason(*packer.status_of(error), self.max_bytes)
        return None

    @property
    def packer_deadline(self) -> float:
        """Seconds a save may pack (or a restore unpack) before the packer is killed and the
        save refused (the restore failed)."""
        if self.packer_seconds is not None:
            return self.packer_seconds
        return PACK_SECONDS + PACK_SECONDS_PER_MIB * self.max_bytes / MIB

    def _packer_argv(self, action: str, *more: str) -> list[str]:
        argv = [sys.executable, "-P", "-m", packer.__name__, action, *more]
        return [*argv, "--parent", str(os.getpid()), "--max-bytes", str(self.max_bytes)]

    def _child_argv(self, action: str, *more: str) -> list[str]:
        assert self.sandbox is not None
        argv = self._packer_argv(action, *more, "--directory", CHECKPOINT)
        argv += ["--uid", str(self.sandbox.uid), "--disk", str(self.sandbox.disk.fd)]
        if self.confinement is None or not self.confinement.entrances():
            argv += ["--memory", str(self.memory_bytes)]  # no cgroup on this host: its rlimit
        return argv

    async def _run_packer(self, argv: list[str], stdin: int, sink: IO[bytes] | None) -> str | None:
        """Run the packer (sandboxed, as the attempt); with ``sink``, copy what it writes
        there, bounded (gzip at its fastest never grows data by more than a small fraction).
        Past ``packer_deadline``, or when the save is cancelled, the child is killed: nothing
        of it outlives the save, nor holds the attempt's disk."""
        passed: list[int] = []
        try:
            entrances = self.confinement.entrances() if self.confinement is not None else []
            for entrance in entrances:
                passed.append(os.open(entrance, os.O_WRONLY | os.O_CLOEXEC))
                argv += ["--enter", str(passed[-1])]
            disk = (self.sandbox.disk.fd,) if self.sandbox is not None else ()
            child = await asyncio.create_subprocess_exec(
                *argv,
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE if sink is not None else asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(*disk, *passed),
                cwd="/",
                start_new_session=True,
            )
        finally:
            for fd in passed:
                os.close(fd)
        ending = asyncio.ensure_future(self._ending(child, sink))
        try:
            await asyncio.wait({ending}, timeout=self.packer_deadline)
        finally:
            late = not ending.done()
            if late:  # past its deadline, or the save was cancelled
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await asyncio.wait({ending})  # it reads to the end: the child is gone
        status, copied, why = ending.result()
        if late:
            doing = "packing" if sink is not None else "unpacking"
            return (
                f"still {doing} after {self.packer_deadline:g}s, its bound for "
                f"{self.max_bytes // MIB} MiB: the packer was killed"
            )
        if not copied:
            return f"its archive grew past {self.max_bytes // MIB} MiB"
        confinement = self.confinement
        if (
            status == -signal.SIGKILL
            and confinement is not None
            and confinement.collect().oom_kills
        ):
            status = OUT_OF_MEMORY  # the kernel's kill at the limit
        if status < 0:
            return f"the packer was killed by {signal.Signals(-status).name}"
        return _reason(status, why.splitlines()[-1] if why else "", self.max_bytes)

    async def _ending(
        self, child: asyncio.subprocess.Process, sink: IO[bytes] | None
    ) -> tuple[int, bool, str]:
        """The child's exit status, whether its output fitted ``sink``, and its last words.
        Reads both pipes to their end (a child killed for writing too much too): until
        then the child is not reaped."""
        assert child.stderr is not None
        errors = asyncio.ensure_future(child.stderr.read())
        copied = True
        if sink is not None:
            assert child.stdout is not None
            copied = await _copy(child.stdout, sink, self.max_bytes + self.max_bytes // 64 + MIB)
            if not copied:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                while await child.stdout.read(COPY_CHUNK_BYTES):
                    pass
        status = await child.wait()
        return status, copied, (await errors).decode(errors="replace").strip()


async def _copy(source: asyncio.StreamReader, sink: IO[bytes], most: int) -> bool:
    """Copy to the end, or False past ``most`` bytes."""
    written = 0
    while chunk := await source.read(COPY_CHUNK_BYTES):
        written += len(chunk)
        if written > most:
            return False
        sink.write(chunk)  # a local file: quicker than a thread hop
    return True


def _reason(status: int, why: str, max_bytes: int) -> str | None:
    if status == 0:
        return None
    if status == OUT_OF_MEMORY:
        return "it needs more than the attempt's memory limit"
    if status == DISK_FULL:
        return "the attempt's disk is full"
    return (why or f"exit status {status}")[:REASON_CHARS]


def _restore_failed(why: str) -> str:
    return (
        f"checkpoint: the run's checkpoint could not be restored: {why} (delete the run's "
        "checkpoint to start over without it)"
    )[:REASON_CHARS]


@dataclass
class SaveWatch:
    """While an attempt runs: save its checkpoint every ``interval_seconds`` (none when None;
    not when the directory is empty) and whenever the job creates its request file; a save
    that fails is ``note``d in the attempt's log. A timer looks once a tick; no task exists
    while no save is under way, so an attempt that never asks costs one timer a second."""

    checkpoints: Checkpoints
    interval_seconds: float | None
    note: Callable[[str], None]
    _timer: asyncio.TimerHandle | None = None
    _saving: asyncio.Task[None] | None = None
    _last: float = field(default_factory=time.monotonic)
    _stopped: bool = False

    @property
    def _tick(self) -> float:
        return min(REQUEST_POLL_SECONDS, self.interval_seconds or REQUEST_POLL_SECONDS)

    def start(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._tick, self._look)

    def _look(self) -> None:
        if self._stopped:
            return
        if self._saving is None or self._saving.done():
            requested = os.path.lexists(self.checkpoints.request)
            interval = self.interval_seconds
            due = interval is not None and time.monotonic() - self._last >= interval
            if requested or (due and not self.checkpoints.is_empty()):
                self._saving = asyncio.create_task(self._save())
        self._timer = asyncio.get_running_loop().call_later(self._tick, self._look)

    async def _save(self) -> None:
        why = await self.checkpoints.save()
        self._last = time.monotonic()
        if why is not None:
            self.note(f"herder: checkpoint not saved: {why}\n")

    async def stop(self) -> None:
        """No more saves; one under way finishes."""
        self.cancel(under_way=False)
        if self._saving is not None:
            await self._saving

    def cancel(self, *, under_way: bool = True) -> None:
        """No more saves, and (``under_way``) not the one under way either."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if under_way and self._saving is not None:
            self._saving.cancel()
