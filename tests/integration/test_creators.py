"""Who made what (issue 46): jobs, schedules, workflows and runs keep their creator — the
caller's key, or the system actor that started them (a schedule's fire, an event, a
workflow run's starter for its tasks) — named for people as they are read; listings filter by
creator (``me`` or an actor), within the caller's tenant only; the audit log names the key.
On both stores."""

from __future__ import annotations

from typing import Any

import pytest

from herder.domain.listings import RunQuery
from herder.domain.models import Role
from herder.store.history import listing
from tests.integration.conftest import Api
from tests.integration.test_schedules import Firing, firing  # noqa: F401

TASKS = [{"name": "a", "job": "build"}, {"name": "b", "job": "build", "depends_on": ["a"]}]


def made(api: Api, headers: dict[str, str], path: str, **body: Any) -> dict[str, Any]:
    response = api.http.post(path, headers=headers, json=body)
    assert response.status_code in (200, 201), response.text
    found: dict[str, Any] = response.json()
    return found


def listed(api: Api, headers: dict[str, str], path: str, created_by: str) -> list[str]:
    response = api.http.get(path, headers=headers, params={"created_by": created_by})
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


def admin_key(api: Api) -> dict[str, Any]:
    current: dict[str, Any] = api.http.get("/v1/keys/current", headers=api.admin).json()
    return current


def key_of(api: Api, name: str, role: Role = Role.DEVELOPER) -> tuple[str, dict[str, str]]:
    """A key of the test's tenant: its actor and its headers."""
    key, token = api.store.access.create_api_key(api.tenant_id, role, name)
    return f"user:{key.id}", api.as_key(token)


def test_each_object_keeps_its_creator_named_and_an_edit_leaves_it(api: Api) -> None:
    actor, deployer = key_of(api, "deployer")
    job = made(api, deployer, "/v1/jobs", name="build", runtime="shell", command="true")
    schedule = made(api, deployer, "/v1/schedules", job_id=job["id"], cron="0 3 * * *")
    workflow = made(api, deployer, "/v1/workflows", name="flow", tasks=TASKS)
    for created, path in (
        (job, f"/v1/jobs/{job['id']}"),
        (schedule, f"/v1/schedules/{schedule['id']}"),
        (workflow, f"/v1/workflows/{workflow['id']}"),
    ):
        assert (created["created_by"], created["created_by_name"]) == (actor, "deployer")
        read = api.http.get(path, headers=api.admin).json()
        assert (read["created_by"], read["created_by_name"]) == (actor, "deployer")
    patched = api.http.patch(f"/v1/jobs/{job['id']}", headers=api.admin, json={"args": ["x"]})
    assert patched.json()["created_by"] == actor  # the admin changed it; the deployer made it
    again = api.http.patch(
        f"/v1/schedules/{schedule['id']}", headers=api.admin, json={"cron": "0 4 * * *"}
    )
    assert again.json()["created_by"] == actor
    replaced = api.http.put(
        f"/v1/workflows/{workflow['id']}", headers=api.admin, json={"name": "flow", "tasks": TASKS}
    )
    assert replaced.json()["created_by"] == actor


def test_a_run_keeps_who_started_it_on_every_path(api: Api) -> None:
    actor, deployer = key_of(api, "deployer")
    job = api.create_job("build")
    submitted = made(api, deployer, f"/v1/jobs/{job['id']}/runs")
    assert submitted["created_by"] == actor
    batch = made(api, deployer, "/v1/runs/batch", runs=[{"job_id": job["id"]}] * 2)
    batched = [item["run_id"] for item in batch["items"]]
    api.http.post(f"/v1/runs/{submitted['id']}/cancel", headers=api.admin)
    rerun = made(api, api.admin, f"/v1/runs/{submitted['id']}/rerun")
    assert rerun["created_by"] == f"user:{admin_key(api)['key_id']}"
    detail = api.http.get(f"/v1/runs/{submitted['id']}", headers=api.admin).json()
    assert (detail["created_by"], detail["created_by_name"]) == (actor, "deployer")

    workflow = made(api, api.admin, "/v1/workflows", name="flow", tasks=TASKS)
    started = made(api, deployer, f"/v1/workflows/{workflow['id']}/runs")
    assert started["created_by"] == actor
    task_run = api.http.get("/v1/runs", headers=api.admin, params={"job_id": job["id"]}).json()
    tasks = [run for run in task_run["items"] if run["workflow_run_id"] == started["id"]]
    assert [run["created_by"] for run in tasks] == [actor]  # its first task, as its starter

    schedule = made(api, api.admin, "/v1/schedules", job_id=job["id"], cron="0 3 * * *")
    fired = made(api, deployer, f"/v1/schedules/{schedule['id']}/trigger")
    by_hand = api.http.get(f"/v1/runs/{fired['run_id']}", headers=api.admin).json()
    assert by_hand["created_by"] == actor  # fired by hand: the caller

    made(api, api.admin, "/v1/triggers", name="on-push", event="push", job="build")
    event = made(api, deployer, "/v1/events", name="push", payload={})["event"]
    (outcome,) = event["outcomes"]
    from_event = api.http.get(f"/v1/runs/{outcome['run_id']}", headers=api.admin).json()
    assert (from_event["created_by"], from_event["created_by_name"]) == (
        f"event:{event['id']}",
        None,
    )
    mine = listed(api, deployer, "/v1/runs", "me")
    assert sorted(mine) == sorted([submitted["id"], *batched, tasks[0]["id"], fired["run_id"]])


def test_a_schedules_fire_is_made_by_the_schedule(firing: Firing) -> None:  # noqa: F811
    schedule_id = firing.schedule()
    firing.clock.advance(60)
    firing.fire(schedule_id)
    (run,) = firing.store.runs.list(firing.tenant_id, RunQuery(schedule_id=schedule_id)).items
    assert run.created_by == f"schedule:{schedule_id}"
    query = RunQuery(created_by=f"schedule:{schedule_id}")
    assert [one.id for one in firing.store.runs.list(firing.tenant_id, query).items] == [run.id]


def test_listings_keep_what_me_or_an_actor_made(api: Api) -> None:
    alice, as_alice = key_of(api, "alice")
    bob, as_bob = key_of(api, "bob")
    jobs = {
        who: made(api, headers, "/v1/jobs", name=f"job-{name}", runtime="shell", command="true")
        for who, name, headers in ((alice, "a", as_alice), (bob, "b", as_bob))
    }
    schedules = {
        who: made(api, headers, "/v1/schedules", job_id=jobs[who]["id"], cron="0 3 * * *")
        for who, headers in ((alice, as_alice), (bob, as_bob))
    }
    workflows = {
        who: made(api, headers, "/v1/workflows", name=f"flow-{who[-4:].lower()}",
                  tasks=[{"name": "a", "job": jobs[who]["name"]}])
        for who, headers in ((alice, as_alice), (bob, as_bob))
    }  # fmt: skip
    runs = {
        who: made(api, headers, f"/v1/jobs/{jobs[who]['id']}/runs")
        for who, headers in ((alice, as_alice), (bob, as_bob))
    }
    for path, objects in (
        ("/v1/jobs", jobs),
        ("/v1/schedules", schedules),
        ("/v1/workflows", workflows),
        ("/v1/runs", runs),
    ):
        assert listed(api, as_alice, path, "me") == [objects[alice]["id"]], path
        assert listed(api, as_alice, path, bob) == [objects[bob]["id"]], path
        assert listed(api, api.admin, path, "me") == [], path
    workflow_runs = {
        who: made(api, headers, f"/v1/workflows/{workflows[who]['id']}/runs")["id"]
        for who, headers in ((alice, as_alice), (bob, as_bob))
    }
    assert listed(api, as_alice, "/v1/workflow-runs", "me") == [workflow_runs[alice]]
    assert listed(api, as_alice, "/v1/workflow-runs", bob) == [workflow_runs[bob]]
    page = api.http.get("/v1/jobs", headers=as_bob, params={"created_by": alice}).json()
    assert page["items"][0]["created_by_name"] == "alice"


def test_another_tenants_actor_finds_nothing_and_its_names_stay_its_own(api: Api) -> None:
    other = api.as_key(api.other_tenant_key())
    theirs = made(api, other, "/v1/jobs", name="theirs", runtime="shell", command="true")
    made(api, other, f"/v1/jobs/{theirs['id']}/runs")
    their_actor = theirs["created_by"]
    for path in ("/v1/jobs", "/v1/schedules", "/v1/workflows", "/v1/runs"):
        assert listed(api, api.admin, path, their_actor) == [], path
    mine = api.create_job("mine")
    assert mine["created_by_name"] == admin_key(api)["key_name"]


@pytest.mark.parametrize(
    "hostile",
    [
        "",
        "ME",
        "me ",
        "user:",
        "user",
        "key_01M8",
        "user:key_1' OR '1'='1",
        "user:key_1\x00",
        "user:key_\u202e1",
        "robot:key_1",
        "user:../../etc",
        "user:" + "k" * 200,
        "%",
        "user:%",
    ],
)
def test_a_hostile_created_by_is_a_422_naming_it(api: Api, hostile: str) -> None:
    for path in ("/v1/jobs", "/v1/schedules", "/v1/workflows", "/v1/runs"):
        response = api.http.get(path, headers=api.admin, params={"created_by": hostile})
        assert response.status_code == 422, (path, response.text)
        problem = response.json()
        assert problem["field"] == "created_by"
        assert response.headers["content-type"] == "application/problem+json"


def test_the_audit_log_names_the_caller(api: Api) -> None:
    actor, deployer = key_of(api, "deployer")
    made(api, deployer, "/v1/jobs", name="build", runtime="shell", command="true")
    entries = api.http.get("/v1/audit", headers=api.admin, params={"action": "jobs.create"})
    assert entries.status_code == 200, entries.text
    (entry,) = [one for one in entries.json()["items"] if one["action"] == "jobs.create"]
    assert (entry["actor"], entry["actor_name"], entry["key_name"]) == (
        actor,
        "deployer",
        "deployer",
    )


def test_a_creators_runs_come_in_pages_that_read_a_bounded_number_of_runs(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No index serves a creator (it would be written at every run's every transition), so a
    page reads at most CREATOR_SCAN_ROWS runs: a sparse creator's pages come short, each with
    a cursor to read on, and following them yields each of its runs once, newest first."""
    monkeypatch.setattr(listing, "CREATOR_SCAN_ROWS", 4)
    rare, as_rare = key_of(api, "rare", Role.OPERATOR)
    _, as_busy = key_of(api, "busy", Role.OPERATOR)
    job = made(api, api.admin, "/v1/jobs", name="build", runtime="shell", command="true")
    path = f"/v1/jobs/{job['id']}/runs"
    mine = []
    for index in range(15):
        if index % 5 == 0:
            mine.append(made(api, as_rare, path)["id"])
        else:
            made(api, as_busy, path)
    seen: list[str] = []
    pages = 0
    cursor = None
    while True:
        params = {"created_by": rare, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.http.get("/v1/runs", headers=api.admin, params=params).json()
        seen += [item["id"] for item in page["items"]]
        assert all(item["created_by"] == rare for item in page["items"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(mine, reverse=True)
    assert pages >= 3  # 15 runs read 4 at a time: short pages with cursors on
    narrowed = api.http.get(
        "/v1/runs", headers=api.admin, params={"created_by": rare, "job_id": job["id"]}
    ).json()  # a job's runs are indexed: filtered as they are read, one full page
    assert [item["id"] for item in narrowed["items"]] == sorted(mine, reverse=True)
