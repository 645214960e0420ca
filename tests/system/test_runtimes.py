"""Every runtime runs a real program, never as root, in a private workspace. One ``herder up``
serves the module (no test stops or reconfigures it); each test is a tenant of its own."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder.client import HerderClient
from tests.system.conftest import Cluster
from tests.system.outside import ECHO_PORT, OUTSIDE

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(start_module_cluster: Callable[..., Cluster]) -> Cluster:
    return start_module_cluster(embedded=True)


def run_and_read(herder: HerderClient, name: str, spec: dict[str, Any]) -> str:
    job = herder.create_job(name, spec)
    run = herder.wait(herder.start_run(job.id, args=["one", "two"]).id, timeout=30)
    output = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "succeeded", (run.reason, output)
    return output


def tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_each_runtime_runs_its_program(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "tool.sh").write_bytes(b'#!/bin/sh\necho "executable $1 $2"\n')
    (tmp_path / "main.py").write_text("import sys\nprint('python', *sys.argv[1:])\n")
    (tmp_path / "app.tar.gz").write_bytes(tar_gz({"bin/run.sh": b'echo "archive $@"\n'}))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("hello.txt", "zipped hello\n")
    (tmp_path / "app.zip").write_bytes(zipped.getvalue())
    with cluster.new_tenant() as herder:
        upload = {name: herder.upload_artifact(tmp_path / name).id for name in (
            "tool.sh", "main.py", "app.tar.gz", "app.zip"
        )}  # fmt: skip
        shell = {"runtime": "shell", "command": 'echo "shell $1 $2"'}
        assert run_and_read(herder, "shell", shell) == "shell one two\n"
        python = {"runtime": "python", "artifact": upload["main.py"]}
        assert run_and_read(herder, "python", python) == "python one two\n"
        executable = {"runtime": "executable", "artifact": upload["tool.sh"]}
        assert run_and_read(herder, "executable", executable) == "executable one two\n"
        archive_job = {
            "runtime": "archive",
            "artifact": upload["app.tar.gz"],
            "command": 'sh bin/run.sh "$@"',
        }
        assert run_and_read(herder, "archive", archive_job) == "archive one two\n"
        zipped_job = {
            "runtime": "archive",
            "artifact": upload["app.zip"],
            "command": "cat hello.txt",
        }
        assert run_and_read(herder, "zip", zipped_job) == "zipped hello\n"


def test_jobs_run_unprivileged_in_a_private_workspace_with_herder_variables(
    cluster: Cluster,
) -> None:
    command = (
        'id -u; stat -c %a "$PWD"; echo "$HERDER_RUN_ID $HERDER_ATTEMPT $HERDER_IDEMPOTENCY_KEY"'
    )
    with cluster.new_tenant() as herder:
        job = herder.create_job("whoami", {"runtime": "shell", "command": command})
        run = herder.wait(herder.start_run(job.id, idempotency_key="k-1").id, timeout=30)
        uid, mode, variables = "".join(c.text for c in herder.logs(run.id).chunks).split("\n")[:3]
    if os.geteuid() == 0:
        assert int(uid) != 0
    assert mode == "700"
    assert variables == f"{run.id} 1 k-1"


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need a root worker")
@pytest.mark.usefixtures("outside")  # a host beyond the worker, routed from it
def test_a_job_reaches_the_network_only_when_allowed_and_never_the_api(
    cluster: Cluster, tmp_path: Path
) -> None:
    port = cluster.url.rsplit(":", 1)[1]
    probe = (
        "import socket\n"
        f"for target in [('{OUTSIDE}', {ECHO_PORT}), ('127.0.0.1', {port})]:\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    print('reached' if s.connect_ex(target) == 0 else 'unreachable')\n"
    )
    with cluster.new_tenant() as herder:
        upload = herder.upload_artifact(_script(tmp_path, probe)).id
        outputs = {}
        for allowed in (False, True):
            job = herder.create_job(
                f"net-{allowed}", {"runtime": "python", "artifact": upload, "network": allowed}
            )
            run = herder.wait(herder.start_run(job.id).id, timeout=30)
            outputs[allowed] = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert outputs == {False: "unreachable\nunreachable\n", True: "reached\nunreachable\n"}


def _script(directory: Path, source: str) -> Path:
    path = directory / "probe.py"
    path.write_text(source)
    return path
