"""Jobs, schedules and workflow tasks name limits (docs/flow-control.md): a limit the tenant
does not have is a 422 naming ``limits.i.limit``; each run's keys are rendered from its
parameters and environment when it is made (a missing value is a 422 naming it at submit, a
schedule's error event at a fire), counted under the limit, and a limit named is not
deleted."""

from __future__ import annotations

from typing import Any

from httpx import Response

from tests.integration.conftest import Api

ACCOUNT = {"name": "account"}
PER_ACCOUNT = {"limit": "per-account", "key": "acct-{params.account}"}


def fields(response: Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["field"] for error in response.json()["errors"]]


def make_limit(api: Api, name: str = "per-account", **spec: Any) -> None:
    body = {"name": name, "max_running": 1, **spec}
    response = api.http.post("/v1/limits", headers=api.admin, json=body)
    assert response.status_code == 201, response.text


def post_job(api: Api, name: str = "sync", **spec: Any) -> Response:
    body = {"name": name, "runtime": "shell", "command": "true", **spec}
    response: Response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    return response


def make_job(api: Api, name: str = "sync", **spec: Any) -> str:
    response = post_job(api, name, **spec)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def submit(api: Api, job_id: str, **overrides: Any) -> Response:
    response: Response = api.http.post(f"/v1/jobs/{job_id}/runs", headers=api.admin, json=overrides)
    return response


def keys(api: Api, limit: str = "per-account") -> list[dict[str, Any]]:
    response = api.http.get(f"/v1/limits/{limit}/keys", headers=api.admin)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


def test_a_reference_to_a_limit_the_tenant_does_not_have_is_a_422(api: Api) -> None:
    refused = post_job(api, limits=[{"limit": "nowhere", "key": "k"}])
    assert fields(refused) == ["limits.0.limit"]
    other = api.store.access.create_tenant("other").id
    api.store.limits.create(other, "theirs", _spec())
    assert fields(post_job(api, limits=[{"limit": "theirs", "key": "k"}])) == ["limits.0.limit"]
    make_limit(api)
    job_id = make_job(api, parameters=[ACCOUNT])
    changed = api.http.patch(
        f"/v1/jobs/{job_id}", headers=api.admin, json={"limits": [{"limit": "x", "key": "k"}]}
    )
    assert fields(changed) == ["limits.0.limit"]
    schedule = api.http.post(
        "/v1/schedules",
        headers=api.admin,
        json={"job_id": job_id, "cron": "0 * * * *", "limits": [{"limit": "x", "key": "k"}],
              "overrides": {"params": {"account": "a"}}},
    )  # fmt: skip
    assert fields(schedule) == ["limits.0.limit"]
    tasks = [{"name": "t", "job": "sync", "limits": [PER_ACCOUNT, {"limit": "x", "key": "k"}]}]
    workflow = api.http.post("/v1/workflows", headers=api.admin, json={"name": "w", "tasks": tasks})
    assert fields(workflow) == ["tasks.0.limits.1.limit"]


def _spec() -> Any:
    from herder.domain.limits import LimitSpec

    return LimitSpec(max_running=1)


def test_a_template_naming_anything_but_params_or_env_is_a_422_naming_its_key(api: Api) -> None:
    make_limit(api)
    for template in ("{tenant.id}", "{secrets.TOKEN}", "{params.account", "a\u0001b", "{}" * 200):
        refused = post_job(api, limits=[{"limit": "per-account", "key": template}])
        assert fields(refused) == ["limits.0.key"], template


def test_each_run_counts_against_the_key_its_parameters_render(api: Api) -> None:
    make_limit(api)
    job_id = make_job(api, parameters=[ACCOUNT], limits=[PER_ACCOUNT])
    for account in ("acme", "acme", "globex"):
        made = submit(api, job_id, params={"account": account})
        assert made.status_code == 201, made.text
    assert made.json()["spec"]["limits"] == [{"limit": "per-account", "key": "acct-globex"}]
    assert keys(api) == [
        {"key": "acct-acme", "running": 0, "queued": 2, "scheduled": 0},
        {"key": "acct-globex", "running": 0, "queued": 1, "scheduled": 0},
    ]
    run = api.store.runs.get(api.tenant_id, made.json()["id"])
    assert run.spec.limits[0].key == "acct-globex"


def test_a_missing_value_at_submit_is_a_422_naming_it(api: Api) -> None:
    make_limit(api)
    job_id = make_job(api, limits=[{"limit": "per-account", "key": "{env.ACCOUNT_ID}"}])
    refused = submit(api, job_id)
    assert fields(refused) == ["limits.0.key"]
    assert "env.ACCOUNT_ID is not set" in refused.json()["detail"]
    huge = submit(api, job_id, env={"ACCOUNT_ID": "x" * 100_000})
    assert huge.status_code in (413, 422), huge.text
    long = submit(api, job_id, env={"ACCOUNT_ID": "x" * 129})
    assert fields(long) == ["limits.0.key"]
    batch = api.http.post(
        "/v1/runs/batch",
        headers=api.admin,
        json={"runs": [{"job_id": job_id, "env": {"ACCOUNT_ID": "a"}}, {"job_id": job_id}]},
    )
    assert batch.status_code == 200, batch.text
    first, second = batch.json()["items"]
    assert first["status"] == 201
    assert second["status"] == 422
    assert "env.ACCOUNT_ID is not set" in second["detail"]
    assert keys(api) == [{"key": "a", "running": 0, "queued": 1, "scheduled": 0}]


def test_a_tasks_reference_wins_over_its_jobs_for_the_same_limit(api: Api) -> None:
    make_limit(api)
    make_job(api, parameters=[ACCOUNT], limits=[PER_ACCOUNT])
    tasks = [{"name": "t", "job": "sync", "limits": [{"limit": "per-account", "key": "all"}]}]
    made = api.http.post(
        "/v1/workflows", headers=api.admin,
        json={"name": "w", "tasks": tasks, "params": {"account": "acme"}},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    started = api.http.post(f"/v1/workflows/{made.json()['id']}/runs", headers=api.admin)
    assert started.status_code == 201, started.text
    assert keys(api) == [{"key": "all", "running": 0, "queued": 1, "scheduled": 0}]


def test_a_limit_that_jobs_schedules_or_workflows_name_is_not_deleted(api: Api) -> None:
    make_limit(api)
    job_id = make_job(api, parameters=[ACCOUNT], limits=[PER_ACCOUNT])
    make_job(api, "other")
    refused = api.http.delete("/v1/limits/per-account", headers=api.admin)
    assert refused.status_code == 409, refused.text
    assert "job sync" in refused.json()["detail"]
    assert "other" not in refused.json()["detail"]
    cleared = api.http.patch(f"/v1/jobs/{job_id}", headers=api.admin, json={"limits": []})
    assert cleared.status_code == 200, cleared.text
    tasks = [{"name": "t", "job": "other", "limits": [PER_ACCOUNT]}]
    workflow = api.http.post("/v1/workflows", headers=api.admin, json={"name": "w", "tasks": tasks})
    assert workflow.status_code == 201, workflow.text
    refused = api.http.delete("/v1/limits/per-account", headers=api.admin)
    assert refused.status_code == 409
    assert "workflow w" in refused.json()["detail"]
    gone = api.http.delete(f"/v1/workflows/{workflow.json()['id']}", headers=api.admin)
    assert gone.status_code == 204, gone.text
    assert api.http.delete("/v1/limits/per-account", headers=api.admin).status_code == 204


def test_a_rerun_counts_against_the_keys_its_run_had(api: Api) -> None:
    make_limit(api)
    job_id = make_job(api, parameters=[ACCOUNT], limits=[PER_ACCOUNT])
    run_id = submit(api, job_id, params={"account": "acme"}).json()["id"]
    cancelled = api.http.post(f"/v1/runs/{run_id}/cancel", headers=api.admin)
    assert cancelled.status_code == 200, cancelled.text
    assert keys(api) == []
    again = api.http.post(f"/v1/runs/{run_id}/rerun", headers=api.admin)
    assert again.status_code == 201, again.text
    assert keys(api) == [{"key": "acct-acme", "running": 0, "queued": 1, "scheduled": 0}]


def test_a_nul_or_a_huge_template_is_refused_before_anything_is_stored(api: Api) -> None:
    make_limit(api)
    nul = post_job(api, limits=[{"limit": "per-account", "key": "a\u0000b"}])
    assert nul.status_code in (400, 422), nul.text
    huge = post_job(api, limits=[{"limit": "per-account", "key": "{params.a}" * 100_000}])
    assert huge.status_code in (413, 422), huge.text
    many = post_job(api, limits=[PER_ACCOUNT] * 5)
    assert fields(many) == ["limits"]
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []


HIDDEN = ["\u0085", "\u202e", "\u2028", "\u2029", "\u200b", "\ufeff", "\u00a0", "\ue000"]


def test_a_key_that_hides_or_reorders_text_is_a_422_naming_it_wherever_it_is_given(
    api: Api,
) -> None:
    """A next-line (U+0085), a right-to-left override (U+202E), a line separator (U+2028), a
    zero-width space (U+200B)… would make a key in reasons and listings read as another."""
    make_limit(api)
    job_id = make_job(api, parameters=[ACCOUNT], limits=[PER_ACCOUNT])
    for character in HIDDEN:
        account = f"acme{character}evil"
        refused = submit(api, job_id, params={"account": account})
        assert fields(refused) == ["limits.0.key"], character
        assert f"U+{ord(character):04X}" in refused.json()["detail"]
        template = post_job(
            api, f"hidden-{ord(character)}", limits=[{"limit": "per-account", "key": account}]
        )
        assert fields(template) == ["limits.0.key"], character
        queue = api.http.get(
            "/v1/queue", headers=api.admin, params={"limit_id": "per-account", "key": account}
        )
        assert fields(queue) == ["key"], character
    assert keys(api) == []
    spaced = submit(api, job_id, params={"account": "acme corp"})
    assert spaced.status_code == 201, spaced.text
    assert keys(api) == [{"key": "acct-acme corp", "running": 0, "queued": 1, "scheduled": 0}]
