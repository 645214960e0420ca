"""Events and triggers through the API (docs/events.md): an event starts what its triggers
say in one transaction, records each outcome, is de-duplicated by its id, and can only ever
start its own tenant's work."""

from __future__ import annotations

from typing import Any

from herder.domain.models import Role
from tests.integration.conftest import Api

PARAMETERS = [
    {"name": "BRANCH", "pattern": "[a-z/]+"},  # required: no default
    {"name": "COUNT", "type": "integer", "default": 1},
]


def trigger(api: Api, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
    response = api.http.post("/v1/triggers", headers=headers or api.admin, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def send(api: Api, name: str, payload: Any, **body: Any) -> Any:
    return api.http.post(
        "/v1/events", headers=api.admin, json={"name": name, "payload": payload, **body}
    )


def test_an_event_starts_the_runs_its_matching_triggers_name_with_values_from_it(api: Api) -> None:
    job = api.create_job("build", parameters=PARAMETERS)
    trigger(
        api, name="on-main", event="github.push", job="build",
        filter="payload.ref == 'refs/heads/main' and payload.size > 0",
        params={"BRANCH": "payload.ref", "COUNT": "payload.size"},
    )  # fmt: skip
    trigger(api, name="on-tags", event="github.push", job="build", filter="payload.tag")
    sent = send(api, "github.push", {"ref": "refs/heads/main", "size": 3})
    assert sent.status_code == 201, sent.text
    event = sent.json()["event"]
    assert sent.headers["Location"] == f"/v1/events/{event['id']}"
    [outcome] = event["outcomes"]  # the tag trigger did not match: it says nothing
    assert outcome["trigger_name"] == "on-main"
    assert outcome["error"] is None
    run = api.http.get(f"/v1/runs/{outcome['run_id']}", headers=api.admin).json()
    assert run["job_id"] == job["id"]
    assert run["state"] == "queued"
    assert run["spec"]["env"]["BRANCH"] == "refs/heads/main"
    assert run["spec"]["env"]["COUNT"] == "3"
    events = api.http.get(f"/v1/runs/{run['id']}/events", headers=api.admin).json()
    assert events[0]["actor"] == f"event:{event['id']}"

    other_branch = send(api, "github.push", {"ref": "refs/heads/dev", "size": 3}).json()
    assert other_branch["event"]["outcomes"] == []


def test_a_trigger_that_cannot_start_records_why_and_the_others_still_start(api: Api) -> None:
    api.create_job("build", parameters=PARAMETERS)
    api.create_job("notify")
    trigger(api, name="a-missing", event="deploy", job="build", params={"BRANCH": "payload.nope"})
    trigger(api, name="b-misfit", event="deploy", job="build", params={"BRANCH": "payload.n"})
    trigger(api, name="c-notify", event="deploy", job="notify")
    event = send(api, "deploy", {"n": 12}).json()["event"]
    by_name = {outcome["trigger_name"]: outcome for outcome in event["outcomes"]}
    assert by_name["a-missing"]["error"] == "params.BRANCH: payload.nope is not in the event"
    assert by_name["b-misfit"]["run_id"] is None
    assert "BRANCH" in by_name["b-misfit"]["error"]
    assert by_name["c-notify"]["run_id"] is not None
    assert by_name["c-notify"]["error"] is None
    read = api.http.get(f"/v1/events/{event['id']}", headers=api.admin).json()
    assert read["outcomes"] == event["outcomes"]
    assert read["payload"] == {"n": 12}


def test_an_event_starts_a_workflow_with_params_from_its_payload(api: Api) -> None:
    api.create_job("train")
    workflow = api.http.post(
        "/v1/workflows",
        headers=api.admin,
        json={
            "name": "pipeline",
            "params": {"model": "base"},
            "tasks": [{"name": "t", "job": "train"}],
        },
    )
    assert workflow.status_code == 201, workflow.text
    trigger(
        api, name="retrain", event="data.ready", workflow="pipeline", params={"model": "payload.m"}
    )
    [outcome] = send(api, "data.ready", {"m": "large"}).json()["event"]["outcomes"]
    assert outcome["workflow_run_id"], outcome
    run = api.http.get(f"/v1/workflow-runs/{outcome['workflow_run_id']}", headers=api.admin)
    assert run.json()["params"] == {"model": "large"}


def test_the_same_event_id_starts_nothing_twice(api: Api) -> None:
    api.create_job("build")
    trigger(api, name="t", event="order.paid", job="build")
    first = send(api, "order.paid", {"order": 1}, id="ord-1")
    again = send(api, "order.paid", {"order": 2}, id="ord-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["duplicate"] is True
    assert again.json()["event"]["id"] == first.json()["event"]["id"]
    assert again.json()["event"]["payload"] == {"order": 1}
    runs = api.http.get("/v1/runs", headers=api.admin).json()["items"]
    assert len(runs) == 1
    listed = api.http.get("/v1/events?name=order.paid", headers=api.admin).json()["items"]
    assert [event["id"] for event in listed] == [first.json()["event"]["id"]]
    assert "payload" not in listed[0]


def test_an_event_only_ever_starts_its_own_tenants_work(api: Api) -> None:
    api.create_job("build")
    trigger(api, name="t", event="push", job="build")
    other = api.as_key(api.other_tenant_key("intruder"))
    refused = api.http.post(
        "/v1/triggers", headers=other, json={"name": "t", "event": "push", "job": "build"}
    )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "job"
    sent = api.http.post("/v1/events", headers=other, json={"name": "push", "payload": {}})
    assert sent.status_code == 201
    assert sent.json()["event"]["outcomes"] == []
    assert api.http.get("/v1/runs", headers=api.admin).json()["items"] == []
    mine = send(api, "push", {}).json()["event"]
    assert api.http.get(f"/v1/events/{mine['id']}", headers=other).status_code == 404


def test_hostile_events_and_triggers_are_refused_naming_the_field(api: Api) -> None:
    api.create_job("build")
    cases = [
        ({"name": "t", "event": "push", "job": "build", "filter": "payload.a ="}, "filter"),
        ({"name": "t", "event": "push", "job": "build", "filter": "__import__('os')"}, "filter"),
        (
            {"name": "t", "event": "push", "job": "build", "filter": "(" * 40 + "true" + ")" * 40},
            "filter",
        ),
        ({"name": "t", "event": "push", "job": "build", "workflow": "w"}, "body"),
        ({"name": "t", "event": "bad name!", "job": "build"}, "event"),
        (
            {"name": "t", "event": "push", "job": "build", "params": {"X": "payload.a > 1"}},
            "params",
        ),
    ]
    for body, field in cases:
        response = api.http.post("/v1/triggers", headers=api.admin, json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["errors"][0]["field"].startswith(field), (body, response.json())
    big = send(api, "push", {"blob": "x" * (256 * 1024)})
    assert big.status_code == 413, big.text
    deep: Any = []
    for _ in range(70):
        deep = [deep]
    nested = send(api, "push", deep)
    assert nested.status_code == 422
    assert nested.json()["errors"][0]["field"] == "payload"
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1])
    assert api.http.post("/v1/events", headers=viewer, json={"name": "push"}).status_code == 403


def test_a_trigger_is_changed_by_patch_and_a_disabled_one_starts_nothing(api: Api) -> None:
    api.create_job("build")
    made = trigger(api, name="t", event="push", job="build")
    changed = api.http.patch(
        "/v1/triggers/t", headers={**api.admin, "If-Match": '"1"'}, json={"enabled": False}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["enabled"] is False
    assert changed.json()["version"] == 2
    stale = api.http.patch("/v1/triggers/t", headers={**api.admin, "If-Match": '"1"'}, json={})
    assert stale.status_code == 412
    assert send(api, "push", {}).json()["event"]["outcomes"] == []
    assert api.http.delete(f"/v1/triggers/{made['id']}", headers=api.admin).status_code == 204
    assert api.http.get("/v1/triggers/t", headers=api.admin).status_code == 404


def test_a_job_or_workflow_a_trigger_starts_is_not_deleted(api: Api) -> None:
    job = api.create_job("build")
    workflow = api.http.post(
        "/v1/workflows",
        headers=api.admin,
        json={"name": "pipe", "tasks": [{"name": "t", "job": "build"}]},
    ).json()
    trigger(api, name="on-push", event="push", workflow="pipe")
    refused = api.http.delete(f"/v1/workflows/{workflow['id']}", headers=api.admin)
    assert refused.status_code == 409, refused.text
    assert "started by trigger(s) on-push" in refused.json()["detail"]
    api.http.delete("/v1/triggers/on-push", headers=api.admin)
    assert api.http.delete(f"/v1/workflows/{workflow['id']}", headers=api.admin).status_code == 204
    trigger(api, name="build-it", event="push", job="build")
    refused = api.http.delete(f"/v1/jobs/{job['id']}", headers=api.admin)
    assert refused.status_code == 409
    assert "started by trigger(s) build-it" in refused.json()["detail"]


def test_a_trigger_giving_a_parameter_its_target_does_not_declare_is_refused_when_saved(
    api: Api,
) -> None:
    """It would be refused at every event: it is refused once, at save, naming the
    parameter (a create, a change, for a job and for a workflow)."""
    api.create_job("build", parameters=PARAMETERS)
    workflow = {
        "name": "pipe",
        "params": {"model": "base"},
        "tasks": [{"name": "t", "job": "build"}],
    }
    assert api.http.post("/v1/workflows", headers=api.admin, json=workflow).status_code == 201
    cases = [
        {"job": "build", "params": {"BRANCH": "payload.ref", "BRNACH": "payload.ref"}},
        {"workflow": "pipe", "params": {"modle": "payload.m"}},
    ]
    for body in cases:
        refused = api.http.post(
            "/v1/triggers", headers=api.admin, json={"name": "t", "event": "push", **body}
        )
        assert refused.status_code == 422, (body, refused.text)
        [error] = refused.json()["errors"]
        wrong = next(name for name in body["params"] if name not in ("BRANCH",))
        assert error["field"] == f"params.{wrong}", error
        assert "is not a parameter of" in error["message"]
    trigger(api, name="t", event="push", job="build", params={"BRANCH": "payload.ref"})
    changed = api.http.patch(
        "/v1/triggers/t", headers=api.admin, json={"params": {"COUNTS": "payload.n"}}
    )
    assert changed.status_code == 422, changed.text
    assert changed.json()["errors"][0]["field"] == "params.COUNTS"
    assert api.http.get("/v1/triggers", headers=api.admin).json()["items"][0]["params"] == {
        "BRANCH": "payload.ref"
    }
