"""Runtime image on a root, sandboxed worker: the image's layers are the attempt's root, its
config says what runs, the job's spec lies on top; the rest of the sandbox is as for any job.
The images are built by the test (``tests/images.py``); the registry is one in the test."""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from herder.client import HerderClient
from tests.images import Image, busybox_image
from tests.system.conftest import Cluster, wait_until

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="runtime image runs only on a root worker"),
]

PROBE = """
echo "greeting: $(cat /etc/greeting)"
echo "variable: $GREETING"
echo "directory: $(pwd)"
echo "words: $0 $1"
touch /written 2>/dev/null && echo "root: writable" || echo "root: read-only"
test -e /usr/bin/python3 && echo "host python: visible" || echo "host python: absent"
test -e /etc/removed && echo "whited out: present" || echo "whited out: gone"
test -e /opt/old && echo "whited out dir: present" || echo "whited out dir: gone"
echo "uid: $(id -u)"
touch "$HOME/out" && echo "workspace: $HOME writable"
"""


def run_output(herder: HerderClient, name: str, spec: dict[str, Any], **start: Any) -> str:
    job = herder.create_job(name, spec)
    run = herder.wait(herder.start_run(job.id, **start).id, timeout=60)
    output = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "succeeded", (run.reason, output)
    return output


def upload(herder: HerderClient, directory: Path, name: str, data: bytes) -> str:
    path = directory / name
    path.write_bytes(data)
    return herder.upload_artifact(path).id


@pytest.mark.parametrize("form", ["oci", "docker"])
def test_the_image_config_runs_on_the_image_root(
    start_cluster: Callable[..., Cluster], tmp_path: Path, form: str
) -> None:
    cluster = start_cluster(embedded=True)
    image = busybox_image(compress=form == "oci")
    data = image.oci_archive() if form == "oci" else image.docker_archive()
    with cluster.client() as herder:
        artifact = upload(herder, tmp_path, "busybox.tar", data)
        output = run_output(herder, "image", {"runtime": "image", "artifact": artifact})
    assert output == "from the top layer in /app with hello from the image\n"


def test_the_job_overrides_the_image_inside_the_same_sandbox(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(embedded=True)
    with cluster.client() as herder:
        artifact = upload(herder, tmp_path, "busybox.tar", busybox_image().oci_archive())
        spec = {
            "runtime": "image",
            "artifact": artifact,
            "command": shlex.quote(PROBE),  # replaces Cmd; the entrypoint is sh -c
            "args": ["first"],
            "env": {"GREETING": "from the job"},
        }
        output = run_output(herder, "probe", spec, args=["one", "two"])
    lines = dict(line.split(": ", 1) for line in output.splitlines())
    assert lines["greeting"] == "from the top layer"
    assert lines["variable"] == "from the job"
    assert lines["directory"] == "/app"
    assert lines["words"] == "one two"  # the run's args replace the job's, appended to Cmd
    assert lines["root"] == "read-only"
    assert lines["host python"] == "absent"
    assert lines["whited out"] == "gone"
    assert lines["whited out dir"] == "gone"
    assert int(lines["uid"]) != 0
    assert lines["workspace"] == "/workspace writable"


class Registry:
    """A registry of one image over the OCI distribution API, serving what it is given
    (its blobs from "storage" it redirects to)."""

    def __init__(self, name: str, image: Image) -> None:
        self.name, self.image = name, image
        self.served: dict[str, bytes] = dict(image.blobs)
        self.asked_storage = threading.Event()
        self.storage_open = threading.Event()  # cleared: storage answers only once it is set
        self.storage_open.set()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                prefix, _, digest = self.path.rpartition("/")
                data = registry.served.get(digest)
                if prefix == f"/v2/{registry.name}/blobs" and data is not None:
                    self.send_response(307)  # as registries send blobs on to their storage
                    self.send_header("Location", f"/storage/{digest}")
                    self.end_headers()
                    return
                if prefix not in (f"/v2/{registry.name}/manifests", "/storage") or data is None:
                    self.send_error(404)
                    return
                if prefix == "/storage":
                    registry.asked_storage.set()
                    registry.storage_open.wait(timeout=60)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.reference = f"127.0.0.1:{self.server.server_address[1]}/{name}@{image.manifest_digest}"

    def __enter__(self) -> Registry:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.storage_open.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry() -> Iterator[Registry]:
    with Registry("tools/busybox", busybox_image()) as started:
        yield started


def test_an_image_by_reference_is_fetched_checked_and_run(
    start_cluster: Callable[..., Cluster], registry: Registry
) -> None:
    cluster = start_cluster(embedded=True, environment={"HERDER_IMAGE_REGISTRIES": registry.url})
    with cluster.client() as herder:
        spec = {"runtime": "image", "image": registry.reference}
        output = run_output(herder, "by-reference", spec)
        assert output == "from the top layer in /app with hello from the image\n"
        registry.served.clear()  # cached: the second run asks the registry nothing
        assert run_output(herder, "again", spec) == output


def test_a_tampered_layer_fails_the_run_and_never_runs(
    start_cluster: Callable[..., Cluster], registry: Registry
) -> None:
    layer = registry.image.layer_digests[-1]
    registry.served[layer] = registry.served[layer][:-8] + b"tampered"
    cluster = start_cluster(embedded=True, environment={"HERDER_IMAGE_REGISTRIES": registry.url})
    with cluster.client() as herder:
        job = herder.create_job("tampered", {"runtime": "image", "image": registry.reference})
        run = herder.wait(herder.start_run(job.id).id, timeout=60)
        output = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "failed"
    assert f"layer {layer}" in (run.reason or "")
    assert "does not match its digest" in (run.reason or "")
    assert output == ""


def test_an_image_job_waits_for_a_sandboxed_worker_and_runs_on_it(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """A worker without a sandbox cannot build an image's root: the run is never placed
    there, it waits saying why, and a sandboxed worker that joins runs it."""
    cluster = start_cluster()
    cluster.start_worker("trusted", "--isolation", "none")
    with cluster.client() as herder:
        wait_until(lambda: any(w.state == "alive" for w in herder.list_workers()), 60, "a worker")
        artifact = upload(herder, tmp_path, "busybox.tar", busybox_image().oci_archive())
        job = herder.create_job("sandboxed-only", {"runtime": "image", "artifact": artifact})
        run = herder.start_run(job.id)
        wait_until(
            lambda: "isolation=sandbox" in (herder.get_run(run.id).waiting_reason or ""),
            30,
            "the run waiting for a sandboxed worker",
        )
        assert herder.get_run(run.id).state == "queued"
        cluster.start_worker("sandboxed")
        ended = herder.wait(run.id, timeout=60)
        names = {worker.id: worker.name for worker in herder.list_workers()}
    assert ended.state == "succeeded", ended.reason
    assert [names[attempt.worker_id] for attempt in ended.attempts] == ["sandboxed"]


def test_a_run_cancelled_while_its_image_is_fetched_ends_at_once(
    start_cluster: Callable[..., Cluster], registry: Registry
) -> None:
    registry.storage_open.clear()
    cluster = start_cluster(embedded=True, environment={"HERDER_IMAGE_REGISTRIES": registry.url})
    with cluster.client() as herder:
        job = herder.create_job("slow-image", {"runtime": "image", "image": registry.reference})
        run = herder.start_run(job.id)
        assert registry.asked_storage.wait(timeout=60), "the worker never fetched a layer"
        herder.cancel_run(run.id)
        ended = herder.wait(run.id, timeout=30)  # the layer is still held back
    assert ended.state == "cancelled", ended.reason
