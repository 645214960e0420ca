"""Uploads: content-addressed, deduplicated per tenant, private to their tenant, at most
10 MB; their bytes in the blob store, only the reference in the database."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

from httpx import Response
from sqlalchemy import func, select

from herder.domain.artifacts import artifact_key
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.schema import artifacts, blobs
from tests.integration.conftest import Api

SCRIPT = b"print('Hello World!')\n"


def upload(api: Api, data: bytes, name: str = "hello.py", key: str | None = None) -> Response:
    headers = api.as_key(key) if key else api.admin
    response: Response = api.http.post(
        "/v1/artifacts", headers=headers, files={"file": (name, data)}
    )
    return response


def test_an_upload_is_named_by_its_sha256(api: Api) -> None:
    response = upload(api, SCRIPT)
    assert response.status_code == 201, response.text
    artifact = response.json()
    assert artifact["id"] == hashlib.sha256(SCRIPT).hexdigest()
    assert artifact["size"] == len(SCRIPT)
    assert artifact["filename"] == "hello.py"
    content = api.http.get(f"/v1/artifacts/{artifact['id']}/content", headers=api.admin)
    assert content.content == SCRIPT


def stored_objects(blob_store: DirectoryBlobStore) -> list[Path]:
    """The files under the store's ``artifacts/``, temporary ones too."""
    return sorted(path for path in blob_store.root.rglob("*") if path.is_file())


def object_of(blob_store: DirectoryBlobStore, tenant_id: str, sha256: str) -> Path:
    return blob_store.root / artifact_key(tenant_id, sha256)


def test_the_same_bytes_are_stored_once_per_tenant_in_the_blob_store(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    sha256 = upload(api, SCRIPT).json()["id"]
    kept = object_of(artifact_blobs, api.tenant_id, sha256)
    inode = kept.stat().st_ino
    assert upload(api, SCRIPT, name="again.py").json()["filename"] == "hello.py"
    assert kept.stat().st_ino == inode  # not written again
    upload(api, SCRIPT, key=api.other_tenant_key())
    with api.store.database.read() as connection:
        assert connection.execute(select(func.count()).select_from(blobs)).scalar() == 0
        rows = connection.execute(select(artifacts.c.tenant_id, artifacts.c.location)).all()
    assert sorted(location for _, location in rows) == ["blob_store", "blob_store"]
    owners = [tenant_id for tenant_id, _ in rows]
    assert stored_objects(artifact_blobs) == sorted(
        object_of(artifact_blobs, owner, sha256) for owner in owners
    )
    assert kept.read_bytes() == SCRIPT
    assert kept.stat().st_mode & 0o777 == 0o600


def test_a_download_streams_the_bytes_from_the_blob_store(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    program = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and a bit: several pieces
    sha256 = upload(api, program, name="tool.bin").json()["id"]
    content = api.http.get(f"/v1/artifacts/{sha256}/content", headers=api.admin)
    assert content.status_code == 200
    assert content.content == program
    assert content.headers["content-length"] == str(len(program))
    assert 'filename="tool.bin"' in content.headers["content-disposition"]
    assert object_of(artifact_blobs, api.tenant_id, sha256).read_bytes() == program


def test_an_upload_past_the_limit_leaves_nothing_behind(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    over = b"x" * (10 * 1024 * 1024 + 1)

    def chunked() -> Iterator[bytes]:  # no Content-Length: the body is bounded as it arrives
        boundary = b"herder-test"
        yield b"--" + boundary + b'\r\nContent-Disposition: form-data; name="file"; '
        yield b'filename="big.bin"\r\n\r\n'
        for _ in range(12):
            yield b"y" * (1024 * 1024)
        yield b"\r\n--" + boundary + b"--\r\n"

    assert upload(api, over, name="big.bin").status_code == 413
    streamed = api.http.post(
        "/v1/artifacts",
        headers={**api.admin, "Content-Type": "multipart/form-data; boundary=herder-test"},
        content=chunked(),
    )
    assert streamed.status_code == 413, streamed.text
    assert stored_objects(artifact_blobs) == []
    with api.store.database.read() as connection:
        assert connection.execute(select(func.count()).select_from(artifacts)).scalar() == 0


def test_an_artifact_whose_file_this_server_lacks_is_a_503_saying_so(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    sha256 = upload(api, SCRIPT).json()["id"]
    object_of(artifact_blobs, api.tenant_id, sha256).unlink()
    response = api.http.get(f"/v1/artifacts/{sha256}/content", headers=api.admin)
    assert response.status_code == 503
    assert "HERDER_COLD_STORE" in response.json()["detail"]


def test_another_tenant_cannot_see_an_artifact(api: Api) -> None:
    artifact_id = upload(api, SCRIPT).json()["id"]
    other = api.as_key(api.other_tenant_key())
    assert api.http.get(f"/v1/artifacts/{artifact_id}", headers=other).status_code == 404
    content = api.http.get(f"/v1/artifacts/{artifact_id}/content", headers=other)
    assert content.status_code == 404
    job = {"name": "steal", "runtime": "python", "artifact": artifact_id}
    assert api.http.post("/v1/jobs", headers=other, json=job).status_code == 422


def test_a_tenant_uploading_the_same_bytes_gets_its_own_copy(
    api: Api, artifact_blobs: DirectoryBlobStore
) -> None:
    """The same digest names each tenant's own object: one tenant's, changed or gone, is
    never what another is served."""
    sha256 = upload(api, SCRIPT).json()["id"]
    other_key = api.other_tenant_key()
    assert upload(api, SCRIPT, key=other_key).status_code == 201
    object_of(artifact_blobs, api.tenant_id, sha256).unlink()
    content = api.http.get(f"/v1/artifacts/{sha256}/content", headers=api.as_key(other_key))
    assert content.content == SCRIPT


def test_an_upload_over_10_mb_gets_413_with_the_limit(api: Api) -> None:
    response = upload(api, b"x" * (10 * 1024 * 1024 + 1), name="big.bin")
    assert response.status_code == 413
    assert "10.0 MiB" in response.json()["detail"]
    assert "10485760 bytes" in response.json()["detail"]


def test_an_upload_of_exactly_10_mb_is_accepted(api: Api) -> None:
    assert upload(api, b"x" * (10 * 1024 * 1024), name="max.bin").status_code == 201


def test_an_archive_job_needs_an_archive(api: Api) -> None:
    script_id = upload(api, SCRIPT).json()["id"]
    job = {"name": "a", "runtime": "archive", "artifact": script_id, "command": "./run.sh"}
    refused = api.http.post("/v1/jobs", headers=api.admin, json=job)
    assert refused.status_code == 422
    assert "tar.gz" in refused.json()["detail"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("run.sh")
        info.size = len(b"echo hi\n")
        archive.addfile(info, io.BytesIO(b"echo hi\n"))
    archive_artifact = upload(api, buffer.getvalue(), name="app.tar.gz").json()
    assert archive_artifact["media_type"] == "application/gzip"
    job["artifact"] = archive_artifact["id"]
    assert api.http.post("/v1/jobs", headers=api.admin, json=job).status_code == 201


def test_a_body_that_is_not_multipart_is_refused_clearly(api: Api) -> None:
    response = api.http.post("/v1/artifacts", headers=api.admin, content=b"raw")
    assert response.status_code == 422
    assert "multipart" in response.json()["detail"]
