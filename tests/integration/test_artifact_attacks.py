"""What a hostile tenant or worker tries against programs in the blob store: naming another
tenant's digest, a worker asking for bytes its attempts do not need or for a path rather than
a digest, an upload whose name is a path, one that writes over another tenant's object. Each
is refused as a missing object would be (404), or lands in the caller's own place."""

from __future__ import annotations

import hashlib

import pytest

from herder.domain.artifacts import artifact_key
from herder.store.cold.blobs import DirectoryBlobStore
from tests.integration.conftest import Api
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_artifact_moves import other_tenant
from tests.integration.test_artifacts import SCRIPT, stored_objects, upload
from tests.integration.test_worker_protocol import claim

SHA256 = hashlib.sha256(SCRIPT).hexdigest()


def test_a_worker_is_served_its_runs_tenants_copy_of_a_digest(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    """Two tenants upload the same bytes; the first's object is then changed on the store.
    A worker running the second's job fetches the second's, never the first's."""
    upload(api, SCRIPT)
    _, other_key = other_tenant(api)
    upload(api, SCRIPT, key=other_key)
    (artifact_blobs.root / artifact_key(api.tenant_id, SHA256)).write_bytes(b"not mine\n")
    worker_id = register_worker(api)
    job = {"name": "py", "runtime": "python", "artifact": SHA256}
    created = api.http.post("/v1/jobs", headers=api.as_key(other_key), json=job).json()
    api.http.post(f"/v1/jobs/{created['id']}/runs", headers=api.as_key(other_key), json={})
    claim(api, worker_id)
    fetched = api.http.get(
        f"/v1/workers/{worker_id}/artifacts/{SHA256}", headers=as_worker(worker_id)
    )
    assert fetched.content == SCRIPT
    assert fetched.headers["content-length"] == str(len(SCRIPT))


@pytest.mark.parametrize(
    "name",
    [
        "..%2F..%2F..%2Fherder.db",
        "%2E%2E",
        SHA256.upper(),
        SHA256 + "%2F..",
        "artifacts%2Ften_x%2F" + SHA256,
        "x" * 5000,
    ],
)
def test_a_worker_asking_for_a_path_not_a_digest_gets_404(api: Api, name: str) -> None:
    upload(api, SCRIPT)
    worker_id = register_worker(api)
    api.start_run(api.create_job("py", runtime="python", command=None, artifact=SHA256)["id"])
    claim(api, worker_id)
    asked = api.http.get(f"/v1/workers/{worker_id}/artifacts/{name}", headers=as_worker(worker_id))
    assert asked.status_code == 404, asked.text


def test_another_tenants_digest_is_404_at_every_route(api: Api) -> None:
    upload(api, SCRIPT)
    _, other_key = other_tenant(api)
    other = api.as_key(other_key)
    for path in (f"/v1/artifacts/{SHA256}", f"/v1/artifacts/{SHA256}/content"):
        assert api.http.get(path, headers=other).status_code == 404
    # the same shape of answer as a digest nobody uploaded: nothing tells them apart
    unknown = api.http.get(f"/v1/artifacts/{'0' * 64}/content", headers=other)
    known = api.http.get(f"/v1/artifacts/{SHA256}/content", headers=other)
    assert known.json()["detail"].replace(SHA256, "X") == unknown.json()["detail"].replace(
        "0" * 64, "X"
    )


def test_an_upload_never_writes_where_its_name_or_another_tenant_points(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    upload(api, SCRIPT)
    mine = artifact_blobs.root / artifact_key(api.tenant_id, SHA256)
    inode = mine.stat().st_ino
    other_id, other_key = other_tenant(api)
    answer = upload(api, SCRIPT, name="../../../" + api.tenant_id + "/x", key=other_key)
    assert answer.json()["filename"] == "x"
    assert mine.stat().st_ino == inode
    assert mine.read_bytes() == SCRIPT
    assert stored_objects(artifact_blobs) == sorted(
        [mine, artifact_blobs.root / artifact_key(other_id, SHA256)]
    )
