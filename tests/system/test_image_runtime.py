"""Runtime image on a root, sandboxed worker: the image's layers are the attempt's root, its
config says what runs, the job's spec lies on top; the rest of the sandbox is as for any job.
The images are built by the test (``tests/images.py``); the registry is one in the test."""

from __future__ import annotations

import base64
import json
import os
import shlex
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from herder.client import HerderClient
from tests.images import Image, Member, busybox_image, directory, layer_tar
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
    cluster: Cluster, tmp_path: Path, form: str
) -> None:
    image = busybox_image(compress=form == "oci", Labels={"form": form})  # a root of its own
    data = image.oci_archive() if form == "oci" else image.docker_archive()
    with cluster.new_tenant() as herder:
        artifact = upload(herder, tmp_path, "busybox.tar", data)
        output = run_output(herder, "image", {"runtime": "image", "artifact": artifact})
    assert output == "from the top layer in /app with hello from the image\n"


def test_the_job_overrides_the_image_inside_the_same_sandbox(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.new_tenant() as herder:
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


def test_another_tenants_config_with_stand_in_layers_never_gets_its_root(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 40, item 8: tenant b uploads tenant a's exact config (a public image's config is
    public) with empty stand-in layers. The worker had a root built for that config and gave
    it to b, whose job printed a's key: a root is now found by the layers too."""
    with cluster.client() as admin:
        keys = {name: admin.create_api_key(admin.create_tenant(name).id)
                for name in ("tenant-a", "tenant-b")}  # fmt: skip
    secret = busybox_image(extra=[directory("secret"), Member("secret/ta-key", b"a's key\n")])
    spec = {"runtime": "image", "command": shlex.quote("cat /secret/ta-key")}  # sh -c its word
    with HerderClient(cluster.url, keys["tenant-a"]) as a:
        artifact = upload(a, tmp_path, "a.tar", secret.oci_archive())
        assert run_output(a, "a", {**spec, "artifact": artifact}) == "a's key\n"
    stand_in = Image([layer_tar([]) for _ in secret.layers], secret.config)
    with HerderClient(cluster.url, keys["tenant-b"]) as b:
        artifact = upload(b, tmp_path, "b.tar", stand_in.oci_archive())
        job = b.create_job("b", {**spec, "artifact": artifact})
        run = b.wait(b.start_run(job.id).id, timeout=60)
        output = "".join(chunk.text for chunk in b.logs(run.id).chunks)
    assert run.state == "failed"
    assert "layer 1 does not match its config's diff_id" in (run.reason or "")
    assert output == ""


@dataclass
class Repository:
    """One image a registry serves under a name: what it serves (a test may tamper with it
    or clear it), whether its storage was asked, what was sent there."""

    name: str
    image: Image
    url: str  # the registry's
    reference: str
    served: dict[str, bytes]
    asked_storage: threading.Event = field(default_factory=threading.Event)
    storage_open: threading.Event = field(default_factory=threading.Event)  # cleared: held
    authorization_at_storage: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.storage_open.set()


class Registry:
    """A registry of images over the OCI distribution API (``serve``: one under a name),
    serving what it is given (its blobs from "storage" it redirects to). With ``sign_in`` (a
    user and password) it answers 401 with a Bearer challenge, its token realm gives a token
    for those, and its storage is on another origin (``localhost`` for ``127.0.0.1``), as a
    cloud's would be."""

    TOKEN = "t0ken-for-pulls"

    def __init__(self, sign_in: tuple[str, str] | None = None) -> None:
        self.repositories: dict[str, Repository] = {}
        registry = self
        basic = "Basic " + base64.b64encode(":".join(sign_in).encode()).decode() if sign_in else ""

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                prefix, _, digest = path.rpartition("/")
                given = self.headers.get("Authorization")
                if sign_in and path == "/token":
                    if given != basic or "scope=repository" not in query:
                        self.send_error(401)
                        return
                    self.answer(json.dumps({"token": Registry.TOKEN}).encode())
                    return
                at_storage = prefix.startswith("/storage/")  # /storage/<name>/<digest>
                if at_storage:
                    name = prefix.removeprefix("/storage/")
                else:  # /v2/<name>/manifests/<digest>, /v2/<name>/blobs/<digest>
                    name = prefix.removeprefix("/v2/").rpartition("/")[0]
                repository = registry.repositories.get(name)
                if sign_in and prefix.startswith("/v2/") and given != f"Bearer {Registry.TOKEN}":
                    self.send_response(401)
                    realm = f"{registry.url}/token"
                    self.send_header(
                        "WWW-Authenticate",
                        f'Bearer realm="{realm}",service="test",scope="repository:{name}:pull"',
                    )
                    self.end_headers()
                    return
                data = repository.served.get(digest) if repository else None
                if repository is None or data is None:
                    self.send_error(404)
                    return
                if prefix == f"/v2/{name}/blobs":
                    self.send_response(307)  # as registries send blobs on to their storage
                    location = f"{registry.storage_url}/storage/{name}/{digest}"
                    self.send_header("Location", location)
                    self.end_headers()
                    return
                if at_storage:
                    repository.authorization_at_storage.append(given)
                    repository.asked_storage.set()
                    repository.storage_open.wait(timeout=60)
                elif prefix != f"/v2/{name}/manifests":
                    self.send_error(404)
                    return
                self.answer(data)

            def answer(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.host = f"127.0.0.1:{port}"
        self.url = f"http://{self.host}"
        self.storage_url = f"http://localhost:{port}" if sign_in else self.url

    def serve(self, name: str, image: Image) -> Repository:
        reference = f"{self.host}/{name}@{image.manifest_digest}"
        repository = Repository(name, image, self.url, reference, dict(image.blobs))
        self.repositories[name] = repository
        return repository

    def __enter__(self) -> Registry:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        for repository in self.repositories.values():
            repository.storage_open.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def module_registry() -> Iterator[Registry]:
    with Registry() as started:
        yield started


@pytest.fixture(scope="module")
def signing_in_registry() -> Iterator[Registry]:
    with Registry(sign_in=("puller", "s3cret")) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(
    start_module_cluster: Callable[..., Cluster],
    module_registry: Registry,
    signing_in_registry: Registry,
) -> Cluster:
    """``herder up`` for the tests that do not reconfigure it, its images from the module's
    registries (without credentials for the one that asks to sign in). Each test runs an
    image of its own (a label in its config): the worker builds an image's root once, and
    would not build it again for another test."""
    registries = f"{module_registry.url},{signing_in_registry.url}"
    return start_module_cluster(embedded=True, environment={"HERDER_IMAGE_REGISTRIES": registries})


@pytest.fixture
def registry(module_registry: Registry, request: pytest.FixtureRequest) -> Iterator[Repository]:
    """The busybox image, labelled by the test, in the module's registry."""
    test = request.node.name
    repository = module_registry.serve(f"tools/busybox-{len(module_registry.repositories)}",
                                       busybox_image(Labels={"test": test}))  # fmt: skip
    yield repository
    repository.storage_open.set()


def test_an_image_by_reference_is_fetched_checked_and_run(
    cluster: Cluster, registry: Repository
) -> None:
    with cluster.new_tenant() as herder:
        spec = {"runtime": "image", "image": registry.reference}
        output = run_output(herder, "by-reference", spec)
        assert output == "from the top layer in /app with hello from the image\n"
        registry.served.clear()  # cached: the second run asks the registry nothing
        assert run_output(herder, "again", spec) == output


def test_a_tampered_layer_fails_the_run_and_never_runs(
    cluster: Cluster, registry: Repository
) -> None:
    layer = registry.image.layer_digests[-1]
    registry.served[layer] = registry.served[layer][:-8] + b"tampered"
    with cluster.new_tenant() as herder:
        job = herder.create_job("tampered", {"runtime": "image", "image": registry.reference})
        run = herder.wait(herder.start_run(job.id).id, timeout=60)
        output = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "failed"
    assert f"layer {layer}" in (run.reason or "")
    assert "does not match its digest" in (run.reason or "")
    assert output == ""


def test_a_registry_that_asks_to_sign_in_gets_a_token_for_the_operators_credentials(
    start_cluster: Callable[..., Cluster],
    cluster: Cluster,
    signing_in_registry: Registry,
    tmp_path: Path,
) -> None:
    """Bearer sign-in as registries do it: 401 with a challenge, a token from the realm for
    the operator's user and password (a 0600 file), the token on every request to the
    registry and never to its storage on another origin; without credentials (the module's
    cluster) the run fails saying so."""
    private = signing_in_registry.serve("private/busybox", busybox_image(Labels={"signs": "in"}))
    credentials = tmp_path / "registries.json"
    credentials.write_text(json.dumps({private.url: {"username": "puller", "password": "s3cret"}}))
    credentials.chmod(0o600)
    environment = {
        "HERDER_IMAGE_REGISTRIES": private.url,
        "HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE": str(credentials),
    }
    signed_in = start_cluster(embedded=True, environment=environment)
    with signed_in.client() as herder:
        spec = {"runtime": "image", "image": private.reference}
        output = run_output(herder, "signed-in", spec)
    assert output == "from the top layer in /app with hello from the image\n"
    assert private.authorization_at_storage  # the layers came through storage
    assert set(private.authorization_at_storage) == {None}

    with cluster.new_tenant() as herder:
        job = herder.create_job("anonymous", spec)
        run = herder.wait(herder.start_run(job.id).id, timeout=60)
    assert run.state == "failed"
    assert "needs credentials" in (run.reason or ""), run.reason
    assert "HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE" in (run.reason or "")


@pytest.mark.timeout(240)  # above the sum of its waits: a loaded box may need them all
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
    cluster: Cluster, registry: Repository
) -> None:
    registry.storage_open.clear()
    with cluster.new_tenant() as herder:
        job = herder.create_job("slow-image", {"runtime": "image", "image": registry.reference})
        run = herder.start_run(job.id)
        assert registry.asked_storage.wait(timeout=60), "the worker never fetched a layer"
        herder.cancel_run(run.id)
        ended = herder.wait(run.id, timeout=30)  # the layer is still held back
    assert ended.state == "cancelled", ended.reason
