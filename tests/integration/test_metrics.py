"""/metrics: the queue and the fleet as Prometheus reads them, counted by the database, for
a system admin only."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from herder.domain.models import Role
from herder.domain.states import ACTIVE_RUN_STATES
from herder.domain.workflows.progress import WorkflowRunState
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker


def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.http.get("/metrics", headers=api.admin)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_the_queue_and_the_fleet_are_counted(api: Api) -> None:
    job = api.create_job("hello", resources={"cpu": 1, "memory_mb": 256})
    for _ in range(3):
        api.start_run(job["id"])
    api.start_run(job["id"], env={"A": "1"})
    before = scrape(api)
    tenant = api.store.access.get_tenant(api.tenant_id).name
    queued = (("priority", "medium"), ("tenant", tenant), ("waiting", "not_seen"))
    assert before["herder_runs_queued", queued] == 4
    assert before["herder_runs", (("state", "queued"),)] == 4
    assert before["herder_workers", (("state", "alive"),)] == 0

    worker_id = register_worker(api, cpu=2, memory_mb=1024)
    dispatch(api.store)
    claimed = api.http.post(
        f"/v1/workers/{worker_id}/claim", headers=as_worker(worker_id),
        json={"max_runs": 10, "wait_seconds": 0},
    )  # fmt: skip
    assert len(claimed.json()["assignments"]) == 2
    after = scrape(api)
    assert after["herder_runs", (("state", "running"),)] == 2
    assert after["herder_runs", (("state", "queued"),)] == 2
    assert after["herder_workers", (("state", "alive"),)] == 1
    assert after["herder_fleet_capacity", (("resource", "cpu"),)] == 2
    assert after["herder_fleet_used", (("resource", "cpu"),)] == 2
    assert after["herder_fleet_free", (("resource", "memory_mb"),)] == 512
    assert after["herder_fleet_used", (("resource", "slots"),)] == 2


def test_each_state_not_yet_ended_has_its_gauge_even_at_zero(api: Api) -> None:
    """Taken from the domain's sets: a new active state is gauged without a list to update."""
    scraped = scrape(api)
    runs = {dict(labels)["state"] for name, labels in scraped if name == "herder_runs"}
    assert runs == set(ACTIVE_RUN_STATES)
    workflow_runs = {
        dict(labels)["state"] for name, labels in scraped if name == "herder_workflow_runs"
    }
    assert workflow_runs == {str(state) for state in WorkflowRunState if not state.is_terminal}


def test_counters_and_histograms_serve_no_created_series(api: Api) -> None:
    """Each would double the samples of a counter for a timestamp nobody reads."""
    api.http.get("/v1/jobs", headers=api.admin)  # counted: a request histogram's child
    names = {name for name, _ in scrape(api)}
    assert "herder_api_request_duration_seconds_count" in names
    assert not [name for name in names if name.endswith("_created")]


def test_only_a_system_admin_may_scrape(api: Api) -> None:
    assert api.http.get("/metrics").status_code == 401
    tenant = api.store.access.create_tenant("acme")
    key = api.store.access.create_api_key(tenant.id, Role.ADMIN, "k")[1]
    assert api.http.get("/metrics", headers=api.as_key(key)).status_code == 403
    assert "herder_runs_queued" not in api.http.get("/metrics", headers=api.as_key(key)).text


def test_queued_runs_are_counted_by_why_they_wait(api: Api) -> None:
    tenant = api.store.access.get_tenant(api.tenant_id).name
    api.start_run(api.create_job("unseen")["id"])
    assert waiting_kinds(api, tenant) == {"not_seen": 1}
    dispatch(api.store)
    assert waiting_kinds(api, tenant) == {"no_workers": 1}
    api.store.access.update_tenant(api.tenant_id, quota_changes={"max_gpus": 1})
    register_worker(api, cpu=2, memory_mb=1024)
    api.start_run(api.create_job("nowhere", requires={"zone": "mars"})["id"])
    api.start_run(api.create_job("huge", resources={"cpu": 8})["id"])
    api.start_run(api.create_job("greedy", resources={"gpus": 2})["id"])
    two = api.create_job("two", resources={"cpu": 2})
    api.start_run(two["id"])
    dispatch(api.store)  # places "unseen" (1 cpu): "two" waits for room
    api.start_run(two["id"])
    api.start_run(api.create_job("pair", replicas=2)["id"])  # 1 cpu each: one fits
    dispatch(api.store)
    assert waiting_kinds(api, tenant) == {
        "labels": 1, "too_big": 1, "quota": 1, "no_capacity": 2, "gang": 1,
    }  # fmt: skip
    api.store.access.update_tenant(api.tenant_id, quota_changes={"max_queued": 1})
    dispatch(api.store)
    assert waiting_kinds(api, tenant)["queue_quota"] == 5


def waiting_kinds(api: Api, tenant: str) -> dict[str, float]:
    return {
        dict(labels)["waiting"]: value
        for (name, labels), value in scrape(api).items()
        if name == "herder_runs_queued" and dict(labels)["tenant"] == tenant
    }


def test_what_the_process_sends_the_database_is_counted_by_kind(api: Api) -> None:
    """A submission is at least an insert and a commit; a listing, a select."""

    def counted(kind: str) -> float:
        return scrape(api).get(("herder_database_statements_total", (("kind", kind),)), 0.0)

    job = api.create_job()
    before = {kind: counted(kind) for kind in ("insert", "select", "commit")}
    api.start_run(job["id"])
    api.http.get("/v1/runs", headers=api.admin)
    after = {kind: counted(kind) for kind in ("insert", "select", "commit")}
    assert all(after[kind] > before[kind] for kind in before), (before, after)
