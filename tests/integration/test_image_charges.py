"""What building an image costs the worker is the attempt's (issue 40, item 10): on a real
sandboxed host, an image refused at its bounds fails its attempt with that reason and with
the CPU the worker spent on it in the usage the attempt reports (its tenant's budgets count
that); the next run of the same image is refused at once, with the same reason, unstacked."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.models import Assignment, CheckpointRef
from herder.domain.states import AttemptState
from herder.protocol import Completion
from herder.worker.attempts import AttemptRunner, LiveAttempt
from herder.worker.cache import ArtifactCache
from herder.worker.disk import CHECKPOINT
from herder.worker.host import AttemptHost, AttemptPlace
from herder.worker.image_layers import MIB
from herder.worker.images import ImageStore
from herder.worker.outcome import Outcome
from tests.images import Image, Member, image_config, layer_tar
from tests.sandboxes import attempt_sandbox, launcher

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root can sandbox an attempt")

SANDBOX_UID = 190017  # its own: other sandboxed tests have 190001-6
BOMB = [layer_tar([Member("zeros", bytes(2 * MIB))])]  # gzipped: a few KiB
BOMB_ARCHIVE = Image(BOMB, image_config(BOMB)).oci_archive()


class SandboxHost:
    """An ``AttemptHost`` of one sandbox at a time: an image job needs one to start."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory

    @contextlib.asynccontextmanager
    async def attempt(self, assignment: Assignment) -> AsyncIterator[AttemptPlace]:
        with attempt_sandbox(launcher(self.factory), SANDBOX_UID) as sandbox:
            disk = sandbox.disk
            yield AttemptPlace(disk.work, disk.root / CHECKPOINT, SANDBOX_UID, sandbox)


class NoCheckpoints:
    """The server's side of checkpoints: an attempt refused before it starts has none."""

    async def upload_checkpoint(self, attempt_id: str, attempt: int, archive: Path) -> None:
        raise AssertionError("nothing is saved here")

    async def download_checkpoint(
        self, attempt_id: str, attempt: int, ref: CheckpointRef, into: Path
    ) -> None:
        raise AssertionError("nothing is restored here")


def attempt_of(artifact: str, number: int) -> LiveAttempt:
    given = Assignment(
        attempt_id=f"att_image{number}", attempt=1, run_id=f"run_image{number}",
        tenant_id="ten_1", idempotency_key=None,
        spec=JobSpec(runtime=Runtime.IMAGE, artifact=artifact),
    )  # fmt: skip
    return LiveAttempt(given, "wrk_1")


def run(runner: AttemptRunner, attempt: LiveAttempt) -> Completion:
    outcomes: list[Outcome] = []
    asyncio.run(runner.run(attempt, lambda _, data: None, outcomes.append))
    [outcome] = outcomes
    return attempt.completion(outcome)


def test_a_refused_image_charges_its_attempt_and_is_refused_again_unstacked(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="herder.worker.images")
    sha256 = hashlib.sha256(BOMB_ARCHIVE).hexdigest()
    downloads: list[str] = []

    async def download(name: str, into: Path) -> None:
        downloads.append(name)
        into.write_bytes(BOMB_ARCHIVE)

    cache = ArtifactCache(tmp_path / "cache", download)
    images = ImageStore(tmp_path / "images", cache, (), max_bytes=MIB)
    host = cast(AttemptHost, SandboxHost(tmp_path_factory))
    runner = AttemptRunner(host, cache, "/usr/bin/python3", 0.5, 256, NoCheckpoints(), images)

    first = run(runner, attempt_of(sha256, 1))
    assert first.outcome is AttemptState.FAILED
    assert "the image unpacks to more than 1 MiB" in first.reason
    assert first.usage is not None
    assert first.usage.cpu_user_seconds + first.usage.cpu_system_seconds > 0  # was 0.0

    (tmp_path / "cache" / sha256).unlink()  # were it read again, it would be fetched again
    second = run(runner, attempt_of(sha256, 2))
    assert second.outcome is AttemptState.FAILED
    assert second.reason == first.reason
    assert downloads == [sha256]
    assert sum("stacking" in record.getMessage() for record in caplog.records) == 1
