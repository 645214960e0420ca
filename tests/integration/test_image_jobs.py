"""Runtime image jobs as the API takes them: an image archive or a reference to an image in
one of the operator's registries, pinned by digest; anything else a 422 naming its field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.store import Store
from tests.conftest import opened_store
from tests.images import Member, busybox_image, layer_tar
from tests.integration.conftest import Api, Herder
from tests.integration.test_artifacts import upload

REGISTRY = "http://127.0.0.1:5000"
PINNED = "127.0.0.1:5000/tools/busybox@sha256:" + "ab" * 32


@pytest.fixture
def store(database_url: str, artifact_blobs: DirectoryBlobStore) -> Iterator[Store]:
    """The server as an operator who allows one registry sets it up."""
    yield from opened_store(database_url, artifact_blobs, REGISTRY)


def refused(api: Api, **spec: Any) -> dict[str, Any]:
    body = {"name": "image-job", "runtime": "image", **spec}
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    problem: dict[str, Any] = response.json()
    return problem


def fields(problem: dict[str, Any]) -> list[str]:
    return [error["field"] for error in problem.get("errors", [])]


def test_an_image_archive_makes_a_job(api: Api) -> None:
    artifact = upload(api, busybox_image().oci_archive(), "busybox.tar").json()["id"]
    job = api.create_job("from-archive", runtime="image", artifact=artifact, command=None)
    assert job["spec"]["runtime"] == "image"
    assert job["spec"]["artifact"] == artifact


def test_a_pinned_reference_to_an_allowed_registry_makes_a_job(api: Api) -> None:
    job = api.create_job("from-registry", runtime="image", image=PINNED, command="echo hi")
    assert job["spec"]["image"] == PINNED


def test_an_image_job_needs_an_archive_or_a_reference_not_both(api: Api) -> None:
    assert "needs either an artifact" in refused(api)["detail"]
    artifact = upload(api, busybox_image().oci_archive(), "busybox.tar").json()["id"]
    assert "not both" in refused(api, artifact=artifact, image=PINNED)["detail"]


def test_a_tag_is_refused_naming_the_field(api: Api) -> None:
    problem = refused(api, image="127.0.0.1:5000/tools/busybox:latest")
    assert fields(problem) == ["image"]
    assert "pinned by digest" in problem["detail"]


def test_a_registry_the_operator_did_not_allow_is_refused(api: Api) -> None:
    problem = refused(api, image="docker.io/library/busybox@sha256:" + "ab" * 32)
    assert fields(problem) == ["image"]
    assert "127.0.0.1:5000" in problem["detail"]


def test_an_artifact_that_is_no_archive_is_refused_naming_the_field(api: Api) -> None:
    script = upload(api, b"#!/bin/sh\necho hi\n", "run.sh").json()["id"]
    problem = refused(api, artifact=script)
    assert fields(problem) == ["artifact"]
    assert "image archive" in problem["detail"]


def test_other_runtimes_take_no_image_and_a_command_must_split(api: Api) -> None:
    body = {"name": "shell", "runtime": "shell", "command": "true", "image": PINNED}
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 422
    assert "takes no image" in response.text
    assert "cannot be split" in refused(api, image=PINNED, command="echo 'open")["detail"]


def test_the_cli_creates_an_image_job_by_reference(herder: Herder, api: Api) -> None:
    created = herder("job", "create", "cli-image", "--image", PINNED, "--command", "echo hi")
    assert created.exit_code == 0, created.output
    listed = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    assert [job["spec"]["image"] for job in listed] == [PINNED]


def test_a_plain_tar_is_accepted_at_save_and_fails_its_run_on_the_worker(api: Api) -> None:
    """Only the media type is checked at save: reading the archive is the worker's."""
    artifact = upload(api, layer_tar([Member("hello.txt", b"hi")]), "plain.tar").json()["id"]
    api.create_job("plain-tar", runtime="image", artifact=artifact, command=None)
