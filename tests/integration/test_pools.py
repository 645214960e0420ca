"""Resource pools through the API (docs/pools.md): system admins make and manage them; a
tenant sees only the pools it has a share in, with only its own share; a job, run, schedule
or workflow task naming a pool its tenant may not use is a 422 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import Response

from herder.domain.models import Role
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch


class Tenant:
    """A tenant with an admin key, as the tests use it."""

    def __init__(self, api: Api, name: str, role: Role = Role.ADMIN) -> None:
        self.id = api.store.access.create_tenant(name).id
        self.headers = api.as_key(api.store.access.create_api_key(self.id, role, "k")[1])


def fields(response: Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["field"] for error in response.json()["errors"]]


def make_pool(api: Api, name: str = "a100", **spec: Any) -> dict[str, Any]:
    response = api.http.post("/v1/pools", headers=api.admin, json={"name": name, **spec})
    assert response.status_code == 201, response.text
    pool: dict[str, Any] = response.json()
    return pool


def make_job(api: Api, tenant: Tenant, name: str = "train", **spec: Any) -> Response:
    body = {"name": name, "runtime": "shell", "command": "true", **spec}
    response: Response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    return response


@pytest.fixture
def ml(api: Api) -> Tenant:
    return Tenant(api, "ml")


@pytest.fixture
def web(api: Api) -> Tenant:
    return Tenant(api, "web")


def test_a_system_admin_creates_reads_changes_and_deletes_a_pool(api: Api, ml: Tenant) -> None:
    share = {"tenant_id": ml.id, "cpu": 8, "memory_mb": 16384, "gpus": 4}
    created = api.http.post(
        "/v1/pools",
        headers=api.admin,
        json={"name": "a100", "description": "the A100 boxes", "shares": [share]},
    )
    assert created.status_code == 201, created.text
    pool = created.json()
    assert created.headers["location"] == f"/v1/pools/{pool['id']}"
    assert pool["id"].startswith("pool_")
    assert pool["selector"] == {"pool": "a100"}  # the default: what `worker --pool` registers
    assert pool["shares"] == [{**share, "cpu": 8.0}]
    assert pool["workers"] == 0

    by_id = api.http.get(f"/v1/pools/{pool['id']}", headers=api.admin).json()
    by_name = api.http.get("/v1/pools/a100", headers=api.admin).json()
    assert by_id == by_name == pool
    listed = api.http.get("/v1/pools", headers=api.admin).json()
    assert [item["name"] for item in listed["items"]] == ["a100"]

    changed = api.http.patch(
        "/v1/pools/a100",
        headers=api.admin,
        json={"selector": {"gpu": "a100"}, "shares": [{"tenant_id": ml.id, "gpus": 2}]},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["selector"] == {"gpu": "a100"}
    assert changed.json()["description"] == "the A100 boxes"  # not given: kept
    assert changed.json()["shares"] == [{"tenant_id": ml.id, "cpu": 0.0, "memory_mb": 0, "gpus": 2}]
    back = api.http.patch("/v1/pools/a100", headers=api.admin, json={"selector": None})
    assert back.json()["selector"] == {"pool": "a100"}

    assert api.http.delete(f"/v1/pools/{pool['id']}", headers=api.admin).status_code == 204
    assert api.http.get("/v1/pools/a100", headers=api.admin).status_code == 404
    assert api.http.delete("/v1/pools/a100", headers=api.admin).status_code == 404


def test_a_pool_counts_the_live_workers_its_selector_takes(api: Api) -> None:
    make_pool(api, "a100")
    make_pool(api, "fast", selector={"disk": "nvme"})
    for labels in ({"pool": "a100"}, {"pool": "a100"}, {"disk": "nvme"}, {}):
        registered = api.http.post(
            "/v1/workers",
            headers=api.worker,
            json={"name": "w", "capacity": {"cpu": 1, "memory_mb": 512}, "labels": labels},
        )
        assert registered.status_code == 201, registered.text
    counts = {pool["name"]: pool["workers"] for pool in api.http.get(
        "/v1/pools", headers=api.admin).json()["items"]}  # fmt: skip
    assert counts == {"a100": 2, "fast": 1}


def test_a_name_taken_is_a_conflict(api: Api) -> None:
    make_pool(api, "a100")
    again = api.http.post("/v1/pools", headers=api.admin, json={"name": "a100"})
    assert (again.status_code, again.json()["field"]) == (409, "name")


def test_a_tenant_sees_only_its_pools_and_its_own_share(api: Api, ml: Tenant, web: Tenant) -> None:
    stranger = Tenant(api, "stranger")
    shares = [{"tenant_id": ml.id, "gpus": 4}, {"tenant_id": web.id, "cpu": 2}]
    pool = make_pool(api, "a100", shares=shares)
    make_pool(api, "other")  # nobody's

    listed = api.http.get("/v1/pools", headers=ml.headers).json()["items"]
    assert [item["name"] for item in listed] == ["a100"]
    assert [share["tenant_id"] for share in listed[0]["shares"]] == [ml.id]
    read = api.http.get("/v1/pools/a100", headers=ml.headers).json()
    assert read["shares"] == [{"tenant_id": ml.id, "cpu": 0.0, "memory_mb": 0, "gpus": 4}]
    assert web.id not in str(read)

    assert api.http.get("/v1/pools", headers=stranger.headers).json()["items"] == []
    for name in ("a100", pool["id"], "other"):
        missing = api.http.get(f"/v1/pools/{name}", headers=stranger.headers)
        assert missing.status_code == 404, missing.text
    assert api.http.get("/v1/pools/other", headers=ml.headers).status_code == 404


def test_only_system_admins_manage_pools(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    calls = [
        ("POST", "/v1/pools", {"name": "mine"}),
        ("PATCH", "/v1/pools/a100", {"shares": [{"tenant_id": ml.id, "gpus": 100}]}),
        ("DELETE", "/v1/pools/a100", None),
    ]
    system_developer = api.as_key(
        api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "d")[1]
    )
    for headers in (ml.headers, system_developer):
        for method, path, body in calls:
            response = api.http.request(method, path, headers=headers, json=body)
            assert response.status_code == 403, (method, path, response.text)
    assert api.store.pools.get("a100").shares[0].gpus == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Big Pool"}, "name"),
        ({"name": "-a"}, "name"),
        ({"name": "a" * 65}, "name"),
        ({"name": "p", "selector": {}}, "selector"),
        ({"name": "p", "selector": {"bad key!": "x"}}, "selector"),
        ({"name": "p", "selector": ["pool"]}, "selector"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "cpu": -1}]}, "shares.0.cpu"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "memory_mb": 2**63}]},
         "shares.0.memory_mb"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "gpus": "many"}]}, "shares.0.gpus"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "gpus": 1.5}]}, "shares.0.gpus"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "cpu": "nan"}]}, "shares.0.cpu"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "cpu": 1e300}]}, "shares.0.cpu"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}", "disks": 1}]}, "shares.0.disks"),
        ({"name": "p", "shares": [{"tenant_id": "ten_NOPE"}]}, "shares.0.tenant_id"),
        ({"name": "p", "shares": [{"tenant_id": "{ml}"}, {"tenant_id": "{ml}"}]}, "shares"),
        ({"name": "p", "shares": [{"cpu": 1}]}, "shares.0.tenant_id"),
    ],
)  # fmt: skip
def test_bad_pools_are_refused_naming_the_field(
    api: Api, ml: Tenant, body: dict[str, Any], field: str
) -> None:
    body = eval_ids(body, ml)
    assert field in fields(api.http.post("/v1/pools", headers=api.admin, json=body))
    make_pool(api, "kept")
    changes = {key: value for key, value in body.items() if key != "name"}
    if changes:
        assert field in fields(api.http.patch("/v1/pools/kept", headers=api.admin, json=changes))
    assert [pool.name for pool in api.store.pools.list().items] == ["kept"]


def eval_ids(body: dict[str, Any], tenant: Tenant) -> dict[str, Any]:
    shares = [
        {**share, "tenant_id": tenant.id} if share.get("tenant_id") == "{ml}" else share
        for share in body.get("shares", [])
    ]
    return {**body, "shares": shares} if "shares" in body else body


def test_an_unknown_tenant_in_a_share_is_named_with_its_position(api: Api, ml: Tenant) -> None:
    shares = [{"tenant_id": ml.id}, {"tenant_id": "ten_01NOPE"}]
    refused = api.http.post("/v1/pools", headers=api.admin, json={"name": "p", "shares": shares})
    assert fields(refused) == ["shares.1.tenant_id"]
    assert "ten_01NOPE not found" in refused.json()["detail"]


def test_a_default_pool_is_one_the_tenant_has_a_share_in(api: Api, ml: Tenant, web: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    path = f"/v1/tenants/{ml.id}"
    for pool in ("nowhere", "Bad Name"):
        refused = api.http.patch(path, headers=api.admin, json={"default_pool": pool})
        assert fields(refused) == ["default_pool"]
    not_web = api.http.patch(f"/v1/tenants/{web.id}", headers=api.admin, json={
        "default_pool": "a100", "weight": 5})  # fmt: skip
    assert fields(not_web) == ["default_pool"]
    assert "no pool named a100 that tenant" in not_web.json()["detail"]
    assert api.store.access.get_tenant(web.id).weight == 1  # nothing of it applied

    set_ = api.http.patch(path, headers=api.admin, json={"default_pool": "a100"})
    assert set_.json()["default_pool"] == "a100"
    kept = api.http.patch(path, headers=api.admin, json={"weight": 2})
    assert kept.json()["default_pool"] == "a100"
    assert api.http.get(path, headers=ml.headers).json()["default_pool"] == "a100"
    own = api.http.patch(path, headers=ml.headers, json={"default_pool": None})
    assert own.status_code == 403
    cleared = api.http.patch(path, headers=api.admin, json={"default_pool": None})
    assert cleared.json()["default_pool"] is None


def test_a_job_names_only_a_pool_its_tenant_may_use(api: Api, ml: Tenant, web: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    make_pool(api, "cpu")  # nobody's
    for pool in ("a100", "cpu", "nowhere"):
        refused = make_job(api, web, pool=pool)
        assert fields(refused) == ["pool"]
        assert refused.json()["detail"] == f"no pool named {pool} that tenant {web.id} may use"
    assert fields(make_job(api, ml, pool="A100!")) == ["pool"]

    job = make_job(api, ml, pool="a100")
    assert job.status_code == 201, job.text
    path = f"/v1/jobs/{job.json()['id']}"
    assert fields(api.http.patch(path, headers=ml.headers, json={"pool": "cpu"})) == ["pool"]
    moved = api.http.patch(path, headers=ml.headers, json={"pool": None})
    assert moved.status_code == 200, moved.text


def test_a_run_names_only_a_pool_its_tenant_may_use(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    make_pool(api, "cpu")
    job = make_job(api, ml, pool="a100").json()
    runs = f"/v1/jobs/{job['id']}/runs"
    assert fields(api.http.post(runs, headers=ml.headers, json={"pool": "cpu"})) == ["pool"]
    ran = api.http.post(runs, headers=ml.headers, json={})
    assert ran.json()["pool"] == "a100"
    moved = api.http.post(runs, headers=ml.headers, json={})
    assert moved.status_code == 201
    detail = api.http.get(f"/v1/runs/{ran.json()['id']}", headers=ml.headers).json()
    assert detail["pool"] == "a100"
    listed = api.http.get("/v1/runs", headers=ml.headers).json()["items"]
    assert {run["pool"] for run in listed} == {"a100"}


def test_a_batch_refuses_only_the_runs_naming_a_pool_they_may_not_use(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    make_pool(api, "cpu")
    job = make_job(api, ml).json()
    batch = [
        {"job_id": job["id"]},
        {"job_id": job["id"], "pool": "cpu"},
        {"job_id": job["id"], "pool": "a100"},
        {"job_id": job["id"], "pool": "nowhere"},
    ]
    answer = api.http.post("/v1/runs/batch", headers=ml.headers, json={"runs": batch}).json()
    assert answer["created"] == 2
    assert [item["status"] for item in answer["items"]] == [201, 422, 201, 422]
    assert [item["field"] for item in answer["items"]] == [None, "runs.1.pool", None, "runs.3.pool"]
    assert answer["items"][3]["detail"] == f"no pool named nowhere that tenant {ml.id} may use"
    made = api.http.get(f"/v1/runs/{answer['items'][2]['run_id']}", headers=ml.headers).json()
    assert made["pool"] == "a100"


def test_schedules_and_workflow_tasks_name_only_usable_pools(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    job = make_job(api, ml).json()
    schedule = {"job_id": job["id"], "cron": "@daily", "overrides": {"pool": "cpu"}}
    refused = api.http.post("/v1/schedules", headers=ml.headers, json=schedule)
    assert fields(refused) == ["overrides.pool"]
    schedule["overrides"] = {"pool": "a100"}
    made = api.http.post("/v1/schedules", headers=ml.headers, json=schedule)
    assert made.status_code == 201, made.text
    changed = api.http.patch(
        f"/v1/schedules/{made.json()['id']}", headers=ml.headers,
        json={"overrides": {"pool": "cpu"}},
    )  # fmt: skip
    assert fields(changed) == ["overrides.pool"]

    tasks: list[dict[str, Any]] = [
        {"name": "a", "job": "train"},
        {"name": "b", "job": "train", "overrides": {"pool": "cpu"}},
    ]
    body = {"name": "w", "tasks": tasks}
    workflow = api.http.post("/v1/workflows", headers=ml.headers, json=body)
    assert fields(workflow) == ["tasks.1.overrides.pool"]
    tasks[1]["overrides"] = {"pool": "a100"}
    workflow = api.http.post("/v1/workflows", headers=ml.headers, json=body)
    assert workflow.status_code == 201, workflow.text


def test_a_deleted_pools_runs_stay_queued(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    job = make_job(api, ml, pool="a100").json()
    run = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=ml.headers, json={}).json()
    assert api.http.delete("/v1/pools/a100", headers=api.admin).status_code == 204
    dispatch(api.store)
    after = api.http.get(f"/v1/runs/{run['id']}", headers=ml.headers).json()
    assert (after["state"], after["pool"]) == ("queued", "a100")
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=ml.headers).json()["spec"]["pool"] == (
        "a100"
    )
    # a job naming it may still change otherwise; naming it anew is refused
    path = f"/v1/jobs/{job['id']}"
    assert api.http.patch(path, headers=ml.headers, json={"command": "false"}).status_code == 200
    refused = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=ml.headers, json={"pool": "a100"})
    assert fields(refused) == ["pool"]


def test_a_tenant_that_loses_its_share_loses_the_pool(api: Api, ml: Tenant, web: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}, {"tenant_id": web.id}])
    assert api.http.get("/v1/pools/a100", headers=web.headers).status_code == 200
    api.http.patch("/v1/pools/a100", headers=api.admin, json={"shares": [{"tenant_id": ml.id}]})
    assert api.http.get("/v1/pools/a100", headers=web.headers).status_code == 404
    assert fields(make_job(api, web, pool="a100")) == ["pool"]
    assert api.store.pools.usable(ml.id) == ("a100",)
    assert api.store.pools.usable(web.id) == ()


def test_pool_changes_are_audited_under_the_system_tenant(api: Api, ml: Tenant) -> None:
    pool = make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    api.http.patch("/v1/pools/a100", headers=api.admin, json={"description": "A100s"})
    api.http.delete(f"/v1/pools/{pool['id']}", headers=api.admin)
    entries = api.http.get("/v1/audit", headers=api.admin, params={"object_type": "pools"})
    found = [(entry["action"], entry["fields"]) for entry in entries.json()["items"]]
    assert found == [
        ("pools.delete", []),
        ("pools.update", ["description"]),
        ("pools.create", ["name", "shares"]),
    ]


def test_hostile_pool_input_is_refused_never_a_server_error(api: Api, ml: Tenant) -> None:
    make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
    long_name = api.http.get(f"/v1/pools/{'x' * 5000}", headers=ml.headers)
    assert long_name.status_code == 404
    assert len(long_name.json()["detail"]) < 200
    for path in ("/v1/pools/a%00100", "/v1/pools/%2e%2e"):
        assert api.http.get(path, headers=ml.headers).status_code in (404, 422)
    many = [{"tenant_id": f"ten_{index}"} for index in range(1001)]
    assert "shares" in fields(api.http.post("/v1/pools", headers=api.admin, json={
        "name": "p", "shares": many}))  # fmt: skip
    assert "description" in fields(api.http.post("/v1/pools", headers=api.admin, json={
        "name": "p", "description": "x" * 1001}))  # fmt: skip
    assert "name" in fields(api.http.patch("/v1/pools/a100", headers=api.admin, json={
        "name": "b100"}))  # fmt: skip
    bad_cursor = api.http.get("/v1/pools", headers=ml.headers, params={"cursor": "nope"})
    assert fields(bad_cursor) == ["cursor"]
    assert [pool.name for pool in api.store.pools.list().items] == ["a100"]


def test_pools_are_listed_newest_first_in_pages(api: Api, ml: Tenant) -> None:
    for name in ("p1", "p2", "p3", "p4"):
        make_pool(api, name, shares=[{"tenant_id": ml.id}] if name != "p3" else [])
    first = api.http.get("/v1/pools", headers=ml.headers, params={"limit": 2}).json()
    assert [pool["name"] for pool in first["items"]] == ["p4", "p2"]
    params = {"limit": 2, "cursor": first["next_cursor"]}
    rest = api.http.get("/v1/pools", headers=ml.headers, params=params).json()
    assert ([pool["name"] for pool in rest["items"]], rest["next_cursor"]) == (["p1"], None)
    usable = api.http.get("/v1/pools", headers=api.admin, params={"usable": True}).json()
    assert usable["items"] == []  # the system tenant has no share in any
