"""A job's version: its ETag, If-Match on PATCH (412 when stale), and no lost update when
two PATCHes of one job meet, on both stores."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from httpx import Response

from herder.app import jobs
from herder.domain.errors import StaleVersion
from herder.domain.models import Job
from herder.store.jobs import JobEdit
from tests.integration.conftest import Api

# Each a different field, so that every change can be seen in the end.
CHANGES: list[dict[str, object]] = [
    {"timeout_seconds": 600},
    {"priority": "high"},
    {"env": {"MODE": "fast"}},
    {"labels": {"team": "data"}},
    {"args": ["--all"]},
    {"preemptible": True},
]


def _patch(api: Api, job_id: object, body: dict[str, object], **headers: str) -> Response:
    response: Response = api.http.patch(
        f"/v1/jobs/{job_id}", headers={**api.admin, **headers}, json=body
    )
    return response


def test_a_job_starts_at_version_1_and_every_change_adds_one(api: Api) -> None:
    created = api.http.post(
        "/v1/jobs", headers=api.admin, json={"name": "v", "runtime": "shell", "command": "true"}
    )
    assert created.status_code == 201
    assert created.json()["version"] == 1
    assert created.headers["ETag"] == '"1"'
    job_id = created.json()["id"]
    read = api.http.get(f"/v1/jobs/{job_id}", headers=api.admin)
    assert read.headers["ETag"] == '"1"'
    assert read.json()["version"] == 1
    for version, change in enumerate(CHANGES[:3], start=2):
        changed = _patch(api, job_id, change)
        assert changed.status_code == 200, changed.text
        assert changed.json()["version"] == version
        assert changed.headers["ETag"] == f'"{version}"'
    listed = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    assert [job["version"] for job in listed] == [4]


def test_a_patch_with_the_current_etag_applies(api: Api) -> None:
    job_id = api.create_job("v")["id"]
    etag = api.http.get(f"/v1/jobs/{job_id}", headers=api.admin).headers["ETag"]
    changed = _patch(api, job_id, {"priority": "low"}, **{"If-Match": etag})
    assert changed.status_code == 200, changed.text
    assert changed.json()["spec"]["priority"] == "low"
    assert changed.headers["ETag"] == '"2"'
    several = _patch(api, job_id, {"priority": "high"}, **{"If-Match": '"7", "2"'})
    assert several.status_code == 200, several.text
    anything = _patch(api, job_id, {"timeout_seconds": 60}, **{"If-Match": "*"})
    assert anything.status_code == 200, anything.text
    assert anything.json()["version"] == 4


@pytest.mark.parametrize("if_match", ['"1"', 'W/"2"', '"1", "3"'])
def test_a_patch_against_a_version_the_job_has_left_is_refused_with_412(
    api: Api, if_match: str
) -> None:
    job_id = api.create_job("v")["id"]
    assert _patch(api, job_id, {"priority": "low"}).status_code == 200  # now at version 2
    refused = _patch(api, job_id, {"timeout_seconds": 60}, **{"If-Match": if_match})
    assert refused.status_code == 412, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["status"] == 412
    assert problem["title"] == "Precondition failed"
    assert "read it again" in problem["detail"]
    assert problem["current_version"] == 2
    after = api.http.get(f"/v1/jobs/{job_id}", headers=api.admin).json()
    assert after["version"] == 2
    assert after["spec"]["timeout_seconds"] == 3600  # the refused change left no trace


def test_an_if_match_that_is_no_etag_is_refused_with_422(api: Api) -> None:
    job_id = api.create_job("v")["id"]
    refused = _patch(api, job_id, {"priority": "low"}, **{"If-Match": "1"})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "If-Match"


def test_a_stale_patch_of_another_tenants_job_is_still_not_found(api: Api) -> None:
    job_id = api.create_job("v")["id"]
    other = api.as_key(api.other_tenant_key())
    response = api.http.patch(
        f"/v1/jobs/{job_id}", headers={**other, "If-Match": '"9"'}, json={"priority": "low"}
    )
    assert response.status_code == 404


def _at_once(api: Api, job_id: object, headers: dict[str, str]) -> list[int]:
    """Every change of CHANGES sent at the same moment, each from its own thread."""
    start = threading.Barrier(len(CHANGES))

    def send(change: dict[str, object]) -> int:
        start.wait(timeout=10)
        return int(_patch(api, job_id, change, **headers).status_code)

    with ThreadPoolExecutor(len(CHANGES)) as pool:
        return list(pool.map(send, CHANGES))


def test_concurrent_patches_each_keep_the_others_change(api: Api) -> None:
    job_id = api.create_job("v")["id"]
    assert _at_once(api, job_id, {}) == [200] * len(CHANGES)
    job = api.http.get(f"/v1/jobs/{job_id}", headers=api.admin).json()
    assert job["version"] == 1 + len(CHANGES)
    for change in CHANGES:
        for field, value in change.items():
            assert job["spec"][field] == value, (field, job["spec"])


def test_concurrent_patches_against_one_version_apply_exactly_one(api: Api) -> None:
    job_id = api.create_job("v")["id"]
    statuses = _at_once(api, job_id, {"If-Match": '"1"'})
    assert sorted(statuses) == [200] + [412] * (len(CHANGES) - 1)
    job = api.http.get(f"/v1/jobs/{job_id}", headers=api.admin).json()
    assert job["version"] == 2
    winner = CHANGES[statuses.index(200)]
    assert all(job["spec"][field] == value for field, value in winner.items())


def _edit_held_open(api: Api, job_id: str, other: Callable[[], object]) -> object:
    """A's edit of the job; while A's transaction is open, ``other`` (B) starts, and must not
    finish before A commits: it is held back, then decides on what A wrote."""
    outcome: list[object] = []

    def run_other() -> None:
        try:
            outcome.append(other())
        except StaleVersion as error:
            outcome.append(error)

    b = threading.Thread(target=run_other)

    def change(job: Job) -> JobEdit:
        b.start()
        b.join(timeout=0.3)  # B gets every chance to write; it must be waiting on A
        assert b.is_alive(), "a second edit finished inside the first's transaction"
        return JobEdit(job.name, job.spec.model_copy(update={"timeout_seconds": 600}))

    api.store.jobs.edit(api.tenant_id, job_id, change)
    b.join(timeout=30)
    assert not b.is_alive()
    return outcome[0]


def test_an_edit_made_while_another_is_written_is_merged_onto_it(api: Api) -> None:
    job_id = str(api.create_job("v")["id"])
    outcome = _edit_held_open(
        api, job_id, lambda: jobs.update(api.store, api.tenant_id, job_id, {"priority": "high"})
    )
    assert isinstance(outcome, Job)
    job = api.store.jobs.get(api.tenant_id, job_id)
    assert (job.spec.timeout_seconds, job.spec.priority, job.version) == (600, "high", 3)


def test_an_edit_against_the_version_another_edit_just_left_is_refused(api: Api) -> None:
    job_id = str(api.create_job("v")["id"])
    outcome = _edit_held_open(
        api,
        job_id,
        lambda: jobs.update(
            api.store, api.tenant_id, job_id, {"priority": "high"}, if_version=frozenset({1})
        ),
    )
    assert isinstance(outcome, StaleVersion)
    assert outcome.current_version == 2
    job = api.store.jobs.get(api.tenant_id, job_id)
    assert (job.spec.timeout_seconds, job.spec.priority, job.version) == (600, "medium", 2)
