"""Uploads: content-addressed, deduplicated, private to their tenant, at most 10 MB."""

from __future__ import annotations

import hashlib
import io
import tarfile

from httpx import Response
from sqlalchemy import func, select

from herder.store.schema import blobs
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


def test_the_same_bytes_are_stored_once(api: Api) -> None:
    upload(api, SCRIPT)
    upload(api, SCRIPT, name="again.py")
    upload(api, SCRIPT, key=api.other_tenant_key())
    with api.store.database.read() as connection:
        assert connection.execute(select(func.count()).select_from(blobs)).scalar() == 1


def test_another_tenant_cannot_see_an_artifact(api: Api) -> None:
    artifact_id = upload(api, SCRIPT).json()["id"]
    other = api.as_key(api.other_tenant_key())
    assert api.http.get(f"/v1/artifacts/{artifact_id}", headers=other).status_code == 404
    job = {"name": "steal", "runtime": "python", "artifact": artifact_id}
    assert api.http.post("/v1/jobs", headers=other, json=job).status_code == 422


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
