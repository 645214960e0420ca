"""An attempt's checkpoint directory on real attempts, sandboxed and at isolation none: saved
at its end, when it asks and every interval, restored for the next attempt; a checkpoint that
could reach outside or expand past its bound refused, one past checkpoint_mb never uploaded; a
save the job sabotages (a fifo swapped in) refused without holding the attempt up, and its
packer bounded in time and never outliving its worker."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.models import Assignment, CheckpointRef
from herder.domain.states import AttemptState
from herder.worker.attempts import AttemptRunner, LiveAttempt
from herder.worker.cache import ArtifactCache
from herder.worker.checkpoints import Checkpoints
from herder.worker.connection import CheckpointGone, CheckpointRefused
from herder.worker.disk import CHECKPOINT
from herder.worker.host import AttemptHost, AttemptPlace
from herder.worker.images import ImageStore
from herder.worker.isolation import Isolation
from herder.worker.limits import Enforcer
from herder.worker.outcome import Outcome
from herder.worker.sandbox import limit_enforcer
from tests.integration.test_executor import living_of_uid
from tests.sandboxes import attempt_sandbox, launcher
from tests.system.conftest import alive, children_of, wait_until

SANDBOX_UID = 190006  # its own: other sandboxed tests that may run beside it have 190001-5
MIB = 1024 * 1024
PYTHON = "/usr/bin/python3"


class Transfer:
    """The server's side: keeps what is uploaded, hands out ``stored``; ``after_upload``
    hears each upload's count."""

    def __init__(
        self,
        stored: bytes | None = b"",
        refuse: str | None = None,
        cancel_after: int | None = None,
        lose_after: int | None = None,
    ) -> None:
        self.stored, self.refuse = stored, refuse
        self.cancel_after, self.lose_after = cancel_after, lose_after
        self.uploads: list[bytes] = []
        self.after_upload: Callable[[int], None] = lambda _: None

    async def upload_checkpoint(self, attempt_id: str, attempt: int, archive: Path) -> None:
        if self.refuse is not None:
            raise CheckpointRefused(self.refuse)
        self.uploads.append(archive.read_bytes())
        self.after_upload(len(self.uploads))

    async def download_checkpoint(
        self, attempt_id: str, attempt: int, ref: CheckpointRef, into: Path
    ) -> None:
        if self.stored is None:
            raise CheckpointGone("run has no checkpoint")
        assert hashlib.sha256(self.stored).hexdigest() == ref.sha256
        into.write_bytes(self.stored)

    def ref(self) -> CheckpointRef:
        stored = self.stored or b""
        digest = hashlib.sha256(stored).hexdigest()
        return CheckpointRef(sha256=digest, stored_bytes=len(stored), attempt=1)


class SandboxHost:
    """An ``AttemptHost`` of one sandbox at a time, on the test's uid."""

    def __init__(self, factory: pytest.TempPathFactory, enforcer: Enforcer) -> None:
        self.factory, self.enforcer = factory, enforcer
        self.checkpoints = factory.mktemp("checkpoints")

    @contextlib.asynccontextmanager
    async def attempt(self, assignment: Assignment) -> AsyncIterator[AttemptPlace]:
        disk_mb = assignment.spec.resources.disk_mb
        with attempt_sandbox(launcher(self.factory), SANDBOX_UID, disk_mb=disk_mb) as sandbox:
            disk = sandbox.disk
            yield AttemptPlace(disk.work, disk.root / CHECKPOINT, SANDBOX_UID, sandbox)


@pytest.fixture(params=["sandbox", "none"])
def host(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "none":
        plain = AttemptHost(
            tmp_path_factory.mktemp("home"), Isolation.NONE, uid_base=63200, uid_count=8,
            server_url="http://x",
        )  # fmt: skip
        yield plain
        asyncio.run(plain.close())
        return
    if os.geteuid() != 0:
        pytest.skip("only root can sandbox an attempt")
    enforcer = limit_enforcer(f"test-checkpoints-{os.getpid()}")
    yield SandboxHost(tmp_path_factory, enforcer)
    enforcer.close()
    assert living_of_uid(SANDBOX_UID) == []


def sandboxed(host: Any) -> bool:
    return isinstance(host, SandboxHost)


def assignment(command: str, attempt: int = 1, **spec: Any) -> Assignment:
    """An attempt of its own: the module's host is shared, and an attempt's workspace and
    checkpoint directory are named by its id, so no test meets what another left there (two
    CI runs met a checkpoint directory gone or changed under a later test's job)."""
    return Assignment(
        attempt_id=f"att_ckpt{attempt}x{uuid.uuid4().hex[:12]}",
        attempt=attempt,
        run_id="run_ckpt",
        tenant_id="ten_fake",
        idempotency_key=None,
        spec=JobSpec(runtime=Runtime.SHELL, command=command, **spec),
    )


def run(host: Any, transfer: Transfer, given: Assignment, tmp_path: Path) -> tuple[Outcome, str]:
    """Run ``given`` to its end: how it ended and what it printed."""

    async def no_artifacts(sha256: str, into: Path) -> None:
        raise AssertionError(f"no artifact is fetched here: {sha256}")

    cache = ArtifactCache(tmp_path / "cache", no_artifacts)
    images = ImageStore(tmp_path / "images", cache, ())
    runner = AttemptRunner(cast(AttemptHost, host), cache, PYTHON, 0.5, 256, transfer, images)
    attempt = LiveAttempt(given, "wrk_fake")

    def after_upload(count: int) -> None:
        if count == transfer.cancel_after:
            attempt.stop.set()
        if count == transfer.lose_after:
            attempt.lose("the worker is stopping")

    transfer.after_upload = after_upload
    outcomes: list[Outcome] = []
    output: list[bytes] = []
    sink = lambda _, data: output.append(data)  # noqa: E731
    asyncio.run(runner.run(attempt, sink, outcomes.append))
    [outcome] = outcomes
    assert attempt.completion(outcome).checkpoint_refused == outcome.checkpoint_refused
    return outcome, b"".join(output).decode()


def members(archive: bytes) -> dict[str, bytes | str]:
    """A file's content, a link's target, a directory's name."""
    found: dict[str, bytes | str] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if member.isreg():
                extracted = tar.extractfile(member)
                assert extracted is not None
                found[member.name] = extracted.read()
            else:
                found[member.name] = member.linkname if member.issym() else "dir"
    return found


def checkpoint_of(tmp_path: Path, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_what_the_job_writes_is_saved_at_its_end_whatever_the_outcome(
    host: Any, tmp_path: Path
) -> None:
    transfer = Transfer()
    command = (
        'echo "$HERDER_CHECKPOINT_DIR $HERDER_CHECKPOINT_REQUEST"; cd "$HERDER_CHECKPOINT_DIR"; '
        "mkdir model; echo 41 > model/step; ln -s model/step latest; mkfifo pipe; exit 3"
    )
    outcome, output = run(host, transfer, assignment(command), tmp_path)
    assert outcome.state is AttemptState.FAILED
    assert outcome.checkpoint_refused is None
    if sandboxed(host):
        assert output == "/checkpoint /workspace/.herder-checkpoint-request\n"
    [saved] = transfer.uploads
    assert members(saved) == {"latest": "model/step", "model": "dir", "model/step": b"41\n"}


def test_the_next_attempt_finds_the_checkpoint_restored(host: Any, tmp_path: Path) -> None:
    transfer = Transfer(checkpoint_of(tmp_path, {"model/step": b"41\n"}))
    command = 'cat "$HERDER_CHECKPOINT_DIR/model/step"; stat -c %u "$HERDER_CHECKPOINT_DIR/model"'
    given = assignment(command, attempt=2).model_copy(update={"checkpoint": transfer.ref()})
    outcome, output = run(host, transfer, given, tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    owner = SANDBOX_UID if sandboxed(host) else os.geteuid()
    assert output == f"41\n{owner}\n"
    [saved] = transfer.uploads  # unchanged, and saved again at its end
    assert members(saved)["model/step"] == b"41\n"


def test_a_checkpoint_deleted_after_the_claim_lets_the_attempt_start_afresh(
    host: Any, tmp_path: Path
) -> None:
    transfer = Transfer(b"deleted meanwhile")
    given = assignment('ls -A "$HERDER_CHECKPOINT_DIR"; echo ran', attempt=2)
    given = given.model_copy(update={"checkpoint": transfer.ref()})
    transfer.stored = None  # DELETE /v1/runs/{id}/checkpoint between the claim and the fetch
    outcome, output = run(host, transfer, given, tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    assert output == "ran\n"


def test_a_run_that_writes_no_checkpoint_uploads_nothing(host: Any, tmp_path: Path) -> None:
    transfer = Transfer()
    outcome, _ = run(host, transfer, assignment("echo hi"), tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED
    assert outcome.checkpoint_refused is None
    assert transfer.uploads == []


def test_the_job_asks_for_a_save_by_creating_its_request_file(host: Any, tmp_path: Path) -> None:
    transfer = Transfer()
    command = (
        'echo 1 > "$HERDER_CHECKPOINT_DIR/step"; touch "$HERDER_CHECKPOINT_REQUEST"; '
        'while [ -e "$HERDER_CHECKPOINT_REQUEST" ]; do sleep 0.05; done; '
        'echo 2 > "$HERDER_CHECKPOINT_DIR/step"'
    )
    outcome, output = run(host, transfer, assignment(command), tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED, output
    assert [members(saved) for saved in transfer.uploads] == [{"step": b"1\n"}, {"step": b"2\n"}]


def test_it_is_saved_every_interval_while_it_runs(host: Any, tmp_path: Path) -> None:
    transfer = Transfer(cancel_after=2)
    command = 'echo 1 > "$HERDER_CHECKPOINT_DIR/step"; while :; do sleep 0.05; done'
    given = assignment(command)
    quick = given.spec.model_copy(update={"checkpoint_interval_seconds": 0.1})  # tests only
    outcome, _ = run(host, transfer, given.model_copy(update={"spec": quick}), tmp_path)
    assert outcome.state is AttemptState.CANCELLED
    assert len(transfer.uploads) >= 3  # two while it ran (more while it stops), one at its end
    assert all(members(saved) == {"step": b"1\n"} for saved in transfer.uploads)


def test_an_attempt_lost_is_not_saved_at_its_end(host: Any, tmp_path: Path) -> None:
    transfer = Transfer(lose_after=1)
    command = (
        'echo 1 > "$HERDER_CHECKPOINT_DIR/step"; touch "$HERDER_CHECKPOINT_REQUEST"; '
        "while :; do sleep 0.05; done"
    )
    outcome, _ = run(host, transfer, assignment(command), tmp_path)
    assert outcome.state is AttemptState.CANCELLED  # reported lost (LiveAttempt.completion)
    assert len(transfer.uploads) == 1  # the one it asked for, none at its end


def test_a_checkpoint_past_checkpoint_mb_is_refused_with_a_reason_and_never_uploaded(
    host: Any, tmp_path: Path
) -> None:
    transfer = Transfer()
    command = (
        'truncate -s 2M "$HERDER_CHECKPOINT_DIR/sparse"; touch "$HERDER_CHECKPOINT_REQUEST"; '
        'while [ -e "$HERDER_CHECKPOINT_REQUEST" ]; do sleep 0.05; done'
    )
    outcome, output = run(host, transfer, assignment(command, checkpoint_mb=1), tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED
    why = "the checkpoint directory holds 2097152 bytes, more than its checkpoint_mb (1 MiB)"
    assert outcome.checkpoint_refused == why
    assert output == f"herder: checkpoint not saved: {why}\n"
    assert transfer.uploads == []


def test_a_save_the_server_refuses_is_reported_with_the_completion(
    host: Any, tmp_path: Path
) -> None:
    transfer = Transfer(refuse="the attempt is no longer running (409)")
    outcome, _ = run(host, transfer, assignment('echo 1 > "$HERDER_CHECKPOINT_DIR/a"'), tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED
    assert outcome.checkpoint_refused == (
        "the server refused it: the attempt is no longer running (409)"
    )


def hostile_checkpoint(kind: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        info = tarfile.TarInfo("evil")
        if kind == "symlink out":
            info.type, info.linkname = tarfile.SYMTYPE, "../../etc/passwd"
        elif kind == "hard link out":
            info.type, info.linkname = tarfile.LNKTYPE, "/etc/passwd"
        elif kind == "dot-dot":
            info.name = "../evil"
        elif kind == "device":
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
        if kind != "gzip bomb":
            tar.addfile(info)
        else:
            info.size = 32 * MIB
            tar.addfile(info, io.BytesIO(bytes(info.size)))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("symlink out", "leads outside"),
        ("hard link out", "neither a file"),
        ("dot-dot", "outside"),
        ("device", "neither a file"),
        ("gzip bomb", "more than the"),
    ],
)
def test_a_hostile_checkpoint_fails_the_attempt_before_the_job_starts(
    host: Any, tmp_path: Path, kind: str, why: str
) -> None:
    transfer = Transfer(hostile_checkpoint(kind))
    command = 'ls -A "$HERDER_CHECKPOINT_DIR"; echo ran'
    given = assignment(command, attempt=2, checkpoint_mb=4).model_copy(
        update={"checkpoint": transfer.ref()}
    )
    outcome, output = run(host, transfer, given, tmp_path)
    assert outcome.state is AttemptState.FAILED
    assert outcome.reason.startswith("checkpoint: the run's checkpoint could not be restored")
    assert why in outcome.reason
    assert output == ""
    assert transfer.uploads == []


def test_a_setuid_bit_in_a_checkpoint_is_dropped(host: Any, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("tool")
        info.mode, info.size = 0o6755, 3
        tar.addfile(info, io.BytesIO(b"#!\n"))
    transfer = Transfer(buffer.getvalue())
    command = 'stat -c %a "$HERDER_CHECKPOINT_DIR/tool"'
    given = assignment(command, attempt=2).model_copy(update={"checkpoint": transfer.ref()})
    outcome, output = run(host, transfer, given, tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    assert output == "755\n"


# Asks for a save, waits until the packer opens its first file (it has listed them all by
# then: inotify), swaps the last one for a fifo before the packer reaches it, waits for the
# save to end, and exits 0.
SWAPS_A_FILE_FOR_A_FIFO = r"""
/usr/bin/python3 - <<'EOF'
import ctypes, os, select, sys, time
directory = os.environ["HERDER_CHECKPOINT_DIR"]
request = os.environ["HERDER_CHECKPOINT_REQUEST"]
for number in range(8):
    with open(f"{directory}/a{number}", "wb") as written:
        written.write(os.urandom(1024 * 1024))
with open(f"{directory}/z", "wb") as written:
    written.write(b"last")
libc = ctypes.CDLL(None, use_errno=True)
events = libc.inotify_init()
libc.inotify_add_watch(events, directory.encode(), 0x20)  # IN_OPEN
open(request, "w").close()
opened, waited = b"", time.monotonic() + 60
while b"a0\0" not in opened:  # bounded: a save that never packs says so, never hangs
    if not select.select([events], [], [], max(0, waited - time.monotonic()))[0]:
        sys.exit("no save opened a0 within 60 s")
    opened += os.read(events, 4096)
os.unlink(f"{directory}/z")
os.mkfifo(f"{directory}/z")
while os.path.lexists(request):
    if time.monotonic() > waited:
        sys.exit("the save did not remove the request within 60 s")
    time.sleep(0.05)
print("swapped")
EOF
"""


def test_a_file_swapped_for_a_fifo_mid_save_refuses_that_save_and_the_attempt_ends(
    host: Any, tmp_path: Path
) -> None:
    outcome, output = run(host, Transfer(), assignment(SWAPS_A_FILE_FOR_A_FIFO), tmp_path)
    assert outcome.state is AttemptState.SUCCEEDED, output
    assert "herder: checkpoint not saved: 'z' changed while it was packed" in output
    assert "swapped\n" in output
    assert outcome.checkpoint_refused is None  # at its end, the fifo is left out


def test_a_save_past_its_deadline_is_refused_and_its_packer_killed(tmp_path: Path) -> None:
    directory, scratch = tmp_path / "checkpoint", tmp_path / "scratch"
    directory.mkdir()
    scratch.mkdir()
    (directory / "step").write_text("1\n")
    transfer = Transfer()
    checkpoints = Checkpoints(
        "att_late", 1, transfer, scratch, directory, tmp_path / "request", MIB, None, 64 * MIB,
        packer_seconds=0,
    )  # fmt: skip
    before = set(children_of(os.getpid()))
    why = asyncio.run(checkpoints.save())
    assert why == "still packing after 0s, its bound for 1 MiB: the packer was killed"
    assert transfer.uploads == []
    assert set(children_of(os.getpid())) <= before  # killed and reaped
    assert list(scratch.iterdir()) == []


def test_a_packer_dies_with_the_worker_that_started_it(tmp_path: Path) -> None:
    """Its parent started it and read one byte (it is packing, past its start), then is
    killed: the packer, blocked on its full pipe, goes too."""
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "weights").write_bytes(os.urandom(4 * MIB))
    parent = subprocess.Popen(
        [sys.executable, "-c", PACKS_INTO_A_PIPE, str(tmp_path / "checkpoint")],
        stdout=subprocess.PIPE,
    )
    try:
        assert parent.stdout is not None
        packer = int(parent.stdout.readline())
        assert alive(packer)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    wait_until(lambda: not alive(packer), 10, "the packer to die with its parent")


PACKS_INTO_A_PIPE = """
import os, subprocess, sys
packer = subprocess.Popen(
    [sys.executable, "-m", "herder.worker.checkpoint_archive", "pack", "--parent",
     str(os.getpid()), "--directory", sys.argv[1], "--max-bytes", str(64 << 20)],
    stdout=subprocess.PIPE,
)
packer.stdout.read(1)
print(packer.pid, flush=True)
packer.wait()
"""
