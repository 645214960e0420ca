"""An archive unpacked inside its attempt, on real sandboxes: as the attempt's uid, charged to
its cgroup, bounded by its disk and memory, and never growing the worker."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from herder.domain.states import AttemptState
from herder.worker.executor import execute
from herder.worker.limits import MIB, Confinement, Enforcer, Limits
from herder.worker.outcome import Outcome
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import SANDBOX_WORKSPACE
from herder.worker.unpacker import unpack_in_attempt
from tests.integration import test_limits
from tests.integration.test_executor import living_of_uid
from tests.integration.test_limits import in_cgroups
from tests.sandboxes import attempt_sandbox, launcher, needs_root
from tests.unit.test_archive import barely_compressible

pytestmark = needs_root

SANDBOX_UID = 190002  # its own: test_launchers, which may run beside it, has 190004
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
ROOMY = Limits(256 * MIB, 1.0)

enforcer = test_limits.enforcer  # the host's limits, and the rlimit fallback forced


@pytest.fixture
def attempt(tmp_path_factory: pytest.TempPathFactory, enforcer: Enforcer) -> Attempt:
    return Attempt(tmp_path_factory, enforcer)


class Attempt:
    """Runs one archive job in a real sandbox: its archive unpacked in its limits, then
    ``command``; ``work`` lists what its workspace held at the end, ``left`` the processes
    of its uid still alive then."""

    def __init__(self, factory: pytest.TempPathFactory, enforcer: Enforcer) -> None:
        self.factory, self.enforcer = factory, enforcer
        self.work: list[str] = []
        self.left: list[int] = []

    def run(
        self,
        archive: Path,
        command: str = "true",
        *,
        limits: Limits = ROOMY,
        disk_mb: int = 64,
        cancel_while_unpacking: bool = False,
    ) -> tuple[Outcome, str]:
        output: list[bytes] = []
        with attempt_sandbox(launcher(self.factory), SANDBOX_UID, disk_mb=disk_mb) as sandbox:
            plan = LaunchPlan(
                ["/bin/sh", "-c", command], ENV, SANDBOX_WORKSPACE, 30, 0.5, limits, sandbox,
                f"att_unpack_{os.getpid()}",
            )  # fmt: skip
            stop = asyncio.Event()

            async def prepare(confinement: Confinement | None) -> str | None:
                disk = sandbox.disk
                return await unpack_in_attempt(
                    archive, disk, SANDBOX_UID, confinement, limits, 30, stop
                )

            async def cancel_once_writing() -> None:
                while not os.listdir(sandbox.disk.work):
                    await asyncio.sleep(0.01)
                stop.set()

            async def go() -> Outcome:
                if cancel_while_unpacking:
                    canceller = asyncio.create_task(cancel_once_writing())
                try:
                    sink = lambda _, data: output.append(data)  # noqa: E731
                    return await execute(plan, sink, stop, self.enforcer, prepare)
                finally:
                    if cancel_while_unpacking:
                        canceller.cancel()

            outcome = asyncio.run(go())
            self.work = sorted(os.listdir(sandbox.disk.work))
            self.left = living_of_uid(SANDBOX_UID)
        return outcome, b"".join(output).decode()


def zip_streamed(path: Path, name: str, mib: int, chunk: bytes, level: int = 1) -> Path:
    """A zip of ``mib`` MiB of ``chunk`` repeated, written without holding it in memory."""
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive,
        archive.open(name, "w", force_zip64=True) as member,
    ):
        for _ in range(mib):
            member.write(chunk)
    return path


def test_an_archive_is_unpacked_by_the_attempts_own_uid(attempt: Attempt, tmp_path: Path) -> None:
    archive = tmp_path / "job.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("pkg/main.sh", "echo hi\n")
    outcome, output = attempt.run(archive, "stat -c %u pkg pkg/main.sh; id -u; sh pkg/main.sh")
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    assert output == f"{SANDBOX_UID}\n{SANDBOX_UID}\n{SANDBOX_UID}\nhi\n"


def test_a_zip_bomb_is_refused_before_a_byte_is_written(attempt: Attempt, tmp_path: Path) -> None:
    bomb = zip_streamed(tmp_path / "bomb.zip", "zeros", 100, bytes(MIB), level=9)
    assert bomb.stat().st_size < 200_000
    outcome, output = attempt.run(bomb, "echo ran", disk_mb=16)
    assert outcome.state is AttemptState.FAILED
    assert outcome.reason.startswith("archive: unpacks to at least 104857600 bytes, more than")
    assert "free on the attempt's disk (its disk_mb)" in outcome.reason
    assert (output, attempt.work) == ("", [])
    outcome, _ = attempt.run(bomb, disk_mb=1024)  # room enough: the ratio refuses it
    assert "more than 100 times its size: refused as a zip bomb" in outcome.reason
    assert attempt.work == []


@pytest.mark.parametrize(
    ("target", "why"),
    [("/etc", "is a link to an absolute path"), ("../..", "is a link that leads outside")],
)
def test_a_link_out_of_the_workspace_is_refused_by_the_unpacker(
    attempt: Attempt, tmp_path: Path, target: str, why: str
) -> None:
    archive = tmp_path / "escape.tar"
    with tarfile.open(archive, "w") as tarred:
        link = tarfile.TarInfo("etc")
        link.type, link.linkname = tarfile.SYMTYPE, target
        tarred.addfile(link)
        tarred.addfile(tarfile.TarInfo("etc/cron.d/evil"), io.BytesIO(b""))
    outcome, _ = attempt.run(archive)
    assert outcome.reason.startswith(f"archive: member 'etc' {why}")
    assert attempt.work == []


def test_an_archive_that_fills_the_disk_fails_the_attempt_saying_so(
    attempt: Attempt, tmp_path: Path
) -> None:
    """Declared sizes fit, but every file takes a page of the 1 MiB disk."""
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for index in range(300):
            zipped.writestr(f"f{index}", b"x")
    outcome, _ = attempt.run(archive, "echo ran", disk_mb=1)
    assert outcome.state is AttemptState.FAILED
    assert outcome.reason == "disk full: the archive fills its 1 MiB disk"


def test_what_an_archive_expands_to_is_the_attempts_memory_not_the_workers(
    attempt: Attempt, tmp_path: Path
) -> None:
    if not in_cgroups(attempt.enforcer):
        pytest.skip("only a cgroup tells what an attempt's files cost in memory")
    archive = zip_streamed(tmp_path / "big.zip", "data", 64, barely_compressible(MIB))
    assert archive.stat().st_size < 20 * MIB
    Path("/proc/self/clear_refs").write_text("5")  # the peak below is the unpacking's
    before = _status_kib("VmRSS")
    outcome, _ = attempt.run(archive, "stat -c %s data", disk_mb=128)
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    assert outcome.usage.max_rss_kb >= 64 * 1024  # the attempt's peak holds its files
    assert _status_kib("VmHWM") - before < 16 * 1024  # this process (the worker) stayed flat
    outcome, _ = attempt.run(archive, "echo ran", limits=Limits(32 * MIB, 1.0), disk_mb=128)
    assert outcome.state is AttemptState.FAILED
    assert outcome.reason == "out of memory: the archive expands past its 32 MiB memory limit"


def _status_kib(field: str) -> int:
    line = next(
        line for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith(f"{field}:")
    )  # fmt: skip
    return int(line.split()[1])


def test_a_cancel_kills_the_unpacking(attempt: Attempt, tmp_path: Path) -> None:
    if not in_cgroups(attempt.enforcer):
        pytest.skip("only a cgroup's CPU limit holds the unpacking long enough to cancel it")
    archive = zip_streamed(tmp_path / "big.zip", "data", 16, barely_compressible(MIB))
    slow = Limits(256 * MIB, 0.01)  # a hundredth of a core: many seconds to unpack
    outcome, output = attempt.run(archive, "echo ran", limits=slow, cancel_while_unpacking=True)
    assert (outcome.state, outcome.reason) == (
        AttemptState.CANCELLED,
        "cancelled before it started",
    )
    assert output == ""
    assert attempt.left == []
