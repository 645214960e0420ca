"""A hostile tenant's archives against a real root worker (issue 22, item 2): a bomb is refused
before a byte is written and never grows the worker; what an archive expands to is the
attempt's (its uid, its memory); a link out of the workspace is refused."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from herder.client import HerderClient
from herder.domain.models import RunDetail
from tests.system.conftest import Cluster, herder_up
from tests.unit.test_archive import barely_compressible

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker sandboxes its attempts"),
]

MIB = 1024 * 1024


class Herder:
    """``herder up`` (its server and sandboxing worker in one process) and a tenant's client."""

    def __init__(self, process: subprocess.Popen[bytes], client: HerderClient) -> None:
        self.process, self.client = process, client

    def run_archive(self, archive: Path, command: str, **spec: Any) -> tuple[RunDetail, str]:
        return run_archive(self.client, archive, command, **spec)

    def status_kib(self, field: str) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
        return int(next(line for line in status if line.startswith(f"{field}:")).split()[1])


def run_archive(
    client: HerderClient, archive: Path, command: str, **spec: Any
) -> tuple[RunDetail, str]:
    """Run ``archive`` as an archive job to its end: the run and everything it printed."""
    artifact = client.upload_artifact(archive).id
    name = f"archive-{uuid.uuid4().hex[:10]}"
    job = client.create_job(
        name, {"runtime": "archive", "artifact": artifact, "command": command, **spec}
    )
    run = client.wait(client.start_run(job.id).id, timeout=60)
    return run, "".join(chunk.text for chunk in client.logs(run.id).chunks)


@pytest.fixture(scope="module")
def herder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Herder]:
    with herder_up(tmp_path_factory.mktemp("archives") / "home") as (process, _, client):
        yield Herder(process, client)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The issue's: a ~1 MB zip of zeros that expands to 1,000 MiB."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.zip"
    zeros = bytes(MIB)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("zeros", "w", force_zip64=True) as member,
    ):
        for _ in range(1000):
            member.write(zeros)
    return path


@pytest.mark.parametrize(
    ("disk_mb", "why"),
    [
        (16, "archive: unpacks to at least 1048576000 bytes, more than the 16777216 bytes free"),
        (1024, "more than 100 times its size: refused as a zip bomb"),
    ],
)
def test_a_zip_bomb_is_refused_before_a_byte_is_written_and_the_worker_stays_flat(
    herder: Herder, bomb: Path, disk_mb: int, why: str
) -> None:
    assert bomb.stat().st_size < 1.1 * MIB
    Path(f"/proc/{herder.process.pid}/clear_refs").write_text("5")  # its peak from here on
    before = herder.status_kib("VmRSS")
    run, output = herder.run_archive(
        bomb, "echo ran", resources={"memory_mb": 64, "disk_mb": disk_mb}
    )
    assert run.state == "failed"
    assert why in (run.reason or "")
    assert output == ""
    assert herder.status_kib("VmHWM") - before < 64 * 1024  # far from the bomb's 1,000 MiB


def test_an_archive_unpacks_as_the_attempt_and_counts_toward_its_memory(
    herder: Herder, tmp_path: Path
) -> None:
    archive = tmp_path / "big.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("data", barely_compressible(40 * MIB))
        zipped.writestr("bin/run.sh", "id -u; stat -c %u data bin/run.sh\n")
    roomy = {"memory_mb": 256, "disk_mb": 128}
    run, output = herder.run_archive(archive, "sh bin/run.sh", resources=roomy)
    assert run.state == "succeeded", run.reason
    uid, *owners = output.split()
    assert int(uid) != 0
    assert owners == [uid, uid]
    assert (run.attempts[0].max_rss_kb or 0) >= 40 * 1024  # the attempt's cgroup saw its files
    tight = {"memory_mb": 24, "disk_mb": 128}
    run, output = herder.run_archive(archive, "echo ran", resources=tight)
    assert run.state == "failed"
    assert run.reason == "out of memory: the archive expands past its 24 MiB memory limit"
    assert output == ""


def test_a_link_out_of_the_workspace_is_refused(herder: Herder, tmp_path: Path) -> None:
    archive = tmp_path / "escape.tar.gz"
    with tarfile.open(archive, "w:gz") as tarred:
        link = tarfile.TarInfo("up")
        link.type, link.linkname = tarfile.SYMTYPE, "../.."
        tarred.addfile(link)
        tarred.addfile(tarfile.TarInfo("up/etc/evil"), io.BytesIO(b""))
    run, output = herder.run_archive(archive, "echo ran")
    assert run.state == "failed"
    assert run.reason == "archive: member 'up' is a link that leads outside the workspace"
    assert output == ""


def test_at_isolation_none_the_worker_refuses_a_bomb_too(
    start_cluster: Callable[..., Cluster], bomb: Path, tmp_path: Path
) -> None:
    cluster = start_cluster()
    cluster.start_worker("trusted", "--isolation", "none")
    legit = tmp_path / "legit.tar.gz"
    with tarfile.open(legit, "w:gz") as tarred:
        script = b"echo unpacked\n"
        info = tarfile.TarInfo("run.sh")
        info.size = len(script)
        tarred.addfile(info, io.BytesIO(script))
    with cluster.client() as client:
        run, output = run_archive(client, bomb, "echo ran", resources={"disk_mb": 16})
        assert run.state == "failed"
        assert (run.reason or "").startswith("archive: unpacks to at least 1048576000 bytes")
        assert output == ""
        run, output = run_archive(client, legit, "sh run.sh")
        assert run.state == "succeeded", run.reason
        assert output == "unpacked\n"
