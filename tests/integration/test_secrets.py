"""/v1/secrets on both stores: set, list, delete; never a value in an answer or a column;
the value reaches only the claim of an attempt whose job names it, as it is when claimed."""

from __future__ import annotations

import base64
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import inspect, text

from herder.domain import secrets as domain_secrets
from herder.domain.models import Role
from herder.store.store import Store
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker

VALUE = "s3cr3t-Vv9-" + base64.b32encode(os.urandom(10)).decode()
ROTATED = "r0tat3d-" + base64.b32encode(os.urandom(10)).decode()


def put(api: Api, name: str, value: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.put(f"/v1/secrets/{name}", headers=headers or api.admin, json={"value": value})


def claim(api: Api, worker_id: str) -> list[dict[str, Any]]:
    dispatch(api.store)
    response = api.http.post(
        f"/v1/workers/{worker_id}/claim",
        headers=as_worker(worker_id),
        json={"max_runs": 10, "wait_seconds": 0},
    )
    assert response.status_code == 200, response.text
    assignments: list[dict[str, Any]] = response.json()["assignments"]
    return assignments


def in_plain_sight(value: str) -> list[str]:
    """The value and its base64 (a lazy leak would encode it)."""
    return [value, base64.b64encode(value.encode()).decode()]


def cells_holding(store: Store, needles: list[str]) -> list[str]:
    """Every table.column of the database, any type, whose value contains a needle."""
    found = []
    with store.database.engine.connect() as connection:
        for table in inspect(connection).get_table_names():
            result = connection.execute(text(f'SELECT * FROM "{table}"'))
            columns = list(result.keys())
            for row in result:
                for column, cell in zip(columns, row, strict=True):
                    data = bytes(cell) if isinstance(cell, bytes | memoryview) else str(cell)
                    for needle in needles:
                        probe = needle.encode() if isinstance(data, bytes) else needle
                        if probe in data:  # type: ignore[operator]
                            found.append(f"{table}.{column}")
    return found


def test_a_secret_is_set_listed_replaced_and_deleted_never_shown(api: Api) -> None:
    created = put(api, "API_TOKEN", VALUE)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/secrets/API_TOKEN"
    assert created.json()["version"] == 1
    replaced = put(api, "API_TOKEN", ROTATED)
    assert (replaced.status_code, replaced.json()["version"]) == (200, 2)
    assert replaced.json()["created_at"] == created.json()["created_at"]
    put(api, "B_TOKEN", VALUE)
    listing = api.http.get("/v1/secrets", headers=api.admin)
    assert [item["name"] for item in listing.json()["items"]] == ["API_TOKEN", "B_TOKEN"]
    assert set(listing.json()["items"][0]) == {"name", "version", "created_at", "updated_at"}
    first = api.http.get("/v1/secrets?limit=1", headers=api.admin).json()
    after = api.http.get(f"/v1/secrets?limit=1&cursor={first['next_cursor']}", headers=api.admin)
    assert [item["name"] for item in after.json()["items"]] == ["B_TOKEN"]
    one = api.http.get("/v1/secrets/API_TOKEN", headers=api.admin)
    assert one.json()["version"] == 2
    answers = [created.text, replaced.text, listing.text, one.text]
    assert not any(needle in answer for answer in answers for needle in in_plain_sight(VALUE))
    assert api.http.delete("/v1/secrets/API_TOKEN", headers=api.admin).status_code == 204
    assert api.http.get("/v1/secrets/API_TOKEN", headers=api.admin).status_code == 404
    assert api.http.delete("/v1/secrets/API_TOKEN", headers=api.admin).status_code == 404


def test_puts_of_one_new_name_at_once_all_land_one_creating_it(api: Api) -> None:
    def set_one(number: int) -> tuple[int, bool]:
        secret, created = api.store.secrets.put(api.tenant_id, "RACED", f"value {number}")
        return secret.version, created

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(set_one, range(8)))
    assert sorted(version for version, _ in results) == list(range(1, 9))
    assert [created for _, created in results].count(True) == 1


def test_another_tenants_secret_is_not_found(api: Api) -> None:
    put(api, "API_TOKEN", VALUE)
    other = api.as_key(api.other_tenant_key())
    assert api.http.get("/v1/secrets/API_TOKEN", headers=other).status_code == 404
    assert api.http.delete("/v1/secrets/API_TOKEN", headers=other).status_code == 404
    assert api.http.get("/v1/secrets", headers=other).json()["items"] == []
    # The other tenant's own secret of that name is its own: ours is untouched.
    assert put(api, "API_TOKEN", ROTATED, other).status_code == 201
    assert api.http.get("/v1/secrets/API_TOKEN", headers=api.admin).json()["version"] == 1
    job = {"name": "j", "runtime": "shell", "command": "true", "secrets": {"T": "B_TOKEN"}}
    put(api, "B_TOKEN", VALUE)
    refused = api.http.post("/v1/jobs", headers=other, json=job)
    assert (refused.status_code, refused.json()["field"]) == (422, "secrets.T")


def test_a_viewer_sees_names_but_cannot_set_or_delete(api: Api) -> None:
    put(api, "API_TOKEN", VALUE)
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "ro")[1])
    assert api.http.get("/v1/secrets", headers=viewer).status_code == 200
    assert api.http.get("/v1/secrets/API_TOKEN", headers=viewer).status_code == 200
    assert put(api, "API_TOKEN", "x", viewer).status_code == 403
    assert api.http.delete("/v1/secrets/API_TOKEN", headers=viewer).status_code == 403
    developer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "d")[1])
    assert put(api, "API_TOKEN", "x", developer).status_code == 200
    assert api.http.get("/v1/secrets", headers={}).status_code == 401


@pytest.mark.parametrize(
    ("name", "body", "status", "field"),
    [
        ("1ABC", {"value": "x"}, 422, "name"),
        ("A-B", {"value": "x"}, 422, "name"),
        ("A" * 129, {"value": "x"}, 422, "name"),
        ("%C3%A9", {"value": "x"}, 422, "name"),
        ("OK", {"value": 5}, 422, "value"),
        ("OK", {}, 422, "value"),
        ("OK", {"value": "x", "extra": 1}, 422, "extra"),
        ("OK", {"value": "nul\u0000"}, 422, "value"),
        ("OK", {"value": "x" * (64 * 1024 + 1)}, 413, "value"),
    ],
)
def test_bad_names_and_values_are_refused_naming_the_field(
    api: Api, name: str, body: dict[str, Any], status: int, field: str
) -> None:
    response = api.http.put(f"/v1/secrets/{name}", headers=api.admin, json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    named = problem.get("field") or problem["errors"][0]["field"]
    assert named == field
    assert api.http.get("/v1/secrets", headers=api.admin).json()["items"] == []


def test_a_value_that_is_not_unicode_text_is_refused(api: Api) -> None:
    """JSON may spell a lone surrogate ("\\ud800"); no environment can hold it."""
    response = api.http.put(
        "/v1/secrets/OK",
        headers={**api.admin, "content-type": "application/json"},
        content=b'{"value": "lone \\ud800"}',
    )
    assert (response.status_code, response.json()["field"]) == (422, "value")


def test_a_value_of_exactly_64_kib_is_kept(api: Api) -> None:
    assert put(api, "BIG", "é" * (32 * 1024)).status_code == 201


def test_a_tenant_holds_a_bounded_number_of_secrets(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(domain_secrets, "MAX_SECRETS_PER_TENANT", 2)
    assert put(api, "A", "1").status_code == 201
    assert put(api, "B", "2").status_code == 201
    refused = put(api, "C", "3")
    assert refused.status_code == 409
    assert "the most it may" in refused.json()["detail"]
    assert put(api, "A", "new").status_code == 200  # a new value needs no room


def test_bad_listing_cursors_are_422(api: Api) -> None:
    for cursor in ("!!", base64.urlsafe_b64encode(b"1bad").decode()):
        response = api.http.get(f"/v1/secrets?cursor={cursor}", headers=api.admin)
        assert (response.status_code, response.json()["field"]) == (422, "cursor")


@pytest.mark.parametrize(
    ("secrets", "env", "field"),
    [
        ({"TOKEN": "MISSING"}, {}, "secrets.TOKEN"),
        ({"HERDER_RUN_ID": "API_TOKEN"}, {}, "secrets"),
        ({"1X": "API_TOKEN"}, {}, "secrets"),
        ({"TOKEN": "not-a-name"}, {}, "secrets"),
        ({"TOKEN": "API_TOKEN"}, {"TOKEN": "plain"}, "secrets"),
    ],
)
def test_a_job_names_only_existing_secrets_by_valid_variables(
    api: Api, secrets: dict[str, str], env: dict[str, str], field: str
) -> None:
    put(api, "API_TOKEN", VALUE)
    body = {"name": "j", "runtime": "shell", "command": "true", "secrets": secrets, "env": env}
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    named = response.json().get("field") or response.json()["errors"][0]["field"]
    assert named == field
    job = api.create_job("ok")
    change = {"secrets": secrets, "env": env}
    patched = api.http.patch(f"/v1/jobs/{job['id']}", headers=api.admin, json=change)
    assert patched.status_code == 422, patched.text


def test_a_run_cannot_add_a_secret_its_job_does_not_name(api: Api) -> None:
    put(api, "API_TOKEN", VALUE)
    job = api.create_job("plain")
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=api.admin, json={"secrets": {"T": "API_TOKEN"}}
    )
    assert response.status_code == 422
    worker_id = register_worker(api)
    api.start_run(job["id"], env={"T": "API_TOKEN"})  # a plain value, nothing more
    (assignment,) = claim(api, worker_id)
    assert assignment["secret_env"] == {}


def test_the_claim_carries_the_value_as_set_when_the_attempt_starts(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    put(api, "API_TOKEN", VALUE)
    job = api.create_job("uses", secrets={"TOKEN": "API_TOKEN"}, env={"PLAIN": "1"})
    worker_id = register_worker(api)
    first = api.start_run(job["id"])
    (assignment,) = claim(api, worker_id)
    assert assignment["secret_env"] == {"TOKEN": VALUE}
    assert assignment["spec"]["secrets"] == {"TOKEN": "API_TOKEN"}
    put(api, "API_TOKEN", ROTATED)
    override = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=api.admin, json={"env": {"TOKEN": "override"}}
    )
    assert override.status_code == 422  # an override cannot replace a secret
    assert override.json()["field"] == "env.TOKEN"
    second = api.start_run(job["id"])
    (rotated,) = claim(api, worker_id)
    assert rotated["secret_env"] == {"TOKEN": ROTATED}
    assert rotated["spec"]["env"] == {"PLAIN": "1"}
    answers = [
        api.http.get(path, headers=api.admin).text
        for run in (first, second)
        for path in (f"/v1/runs/{run['id']}", f"/v1/runs/{run['id']}/events")
    ] + [
        api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).text,
        api.http.get("/v1/runs", headers=api.admin).text,
        api.http.get("/v1/queue", headers=api.admin).text,
    ]
    needles = in_plain_sight(VALUE) + in_plain_sight(ROTATED)
    assert not [answer for answer in answers if any(needle in answer for needle in needles)]
    assert cells_holding(api.store, needles) == []
    assert not [needle for needle in needles if needle in caplog.text]


def test_an_attempt_whose_secret_is_gone_fails_saying_which(api: Api) -> None:
    put(api, "API_TOKEN", VALUE)
    job = api.create_job("uses", secrets={"TOKEN": "API_TOKEN"})
    worker_id = register_worker(api)
    run = api.start_run(job["id"])
    assert api.http.delete("/v1/secrets/API_TOKEN", headers=api.admin).status_code == 204
    assert claim(api, worker_id) == []
    failed = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert failed["state"] == "failed"
    assert failed["reason"] == "secret API_TOKEN (for TOKEN) no longer exists"
    changed = api.http.patch(f"/v1/jobs/{job['id']}", headers=api.admin, json={"args": ["x"]})
    assert (changed.status_code, changed.json()["field"]) == (422, "secrets.TOKEN")


def test_a_value_sealed_for_another_tenant_does_not_open_in_a_claim(api: Api) -> None:
    """A ciphertext copied into another tenant's row (a restore gone wrong, an attack on the
    database) is refused: the attempt fails, no value is handed over."""
    put(api, "API_TOKEN", VALUE)
    other_key = api.other_tenant_key("thief")
    put(api, "API_TOKEN", "theirs", api.as_key(other_key))
    with api.store.database.write() as connection:
        connection.execute(
            text(
                "UPDATE secrets SET ciphertext = (SELECT ciphertext FROM secrets "
                "WHERE tenant_id = :ours), nonce = (SELECT nonce FROM secrets "
                "WHERE tenant_id = :ours) WHERE tenant_id != :ours"
            ),
            {"ours": api.tenant_id},
        )
    thief = api.as_key(other_key)
    body = {"name": "steal", "runtime": "shell", "command": "true", "secrets": {"T": "API_TOKEN"}}
    job = api.http.post("/v1/jobs", headers=thief, json=body).json()
    run = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=thief, json={}).json()
    worker_id = register_worker(api)
    assert claim(api, worker_id) == []
    failed = api.http.get(f"/v1/runs/{run['id']}", headers=thief).json()
    assert failed["state"] == "failed"
    assert "does not open" in failed["reason"]


def test_without_a_server_key_setting_a_secret_says_what_to_configure(
    database_url: str, api: Api
) -> None:
    keyless = Store(database_url)
    try:
        with pytest.raises(Exception, match="HERDER_SECRETS_KEY") as refused:
            keyless.secrets.put(api.tenant_id, "API_TOKEN", VALUE)
        assert type(refused.value).__name__ == "Unavailable"
    finally:
        keyless.close()
