"""Limits by key in the dispatcher, through the store on both stores: a key at its
``max_running`` holds its runs with a reason naming the limit and key while other keys' runs
start; a rate counts the starts recorded within its period, across passes; a run of a full
key never hides another key's run from a tenant's queued window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, update

from herder.store.schema import limit_last_starts, limit_starts, run_limit_keys, runs
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_metrics import scrape, waiting_kinds
from tests.integration.test_pools import Tenant
from tests.integration.test_pools_placement import run_of


def make_limit(api: Api, tenant: Tenant, name: str, **spec: Any) -> str:
    response = api.http.post("/v1/limits", headers=tenant.headers, json={"name": name, **spec})
    assert response.status_code == 201, response.text
    limit_id: str = response.json()["id"]
    return limit_id


def job(api: Api, tenant: Tenant, limit: str = "partner-api") -> str:
    """A job whose runs count against ``limit`` under their parameter ``account``."""
    body = {"name": "call", "runtime": "shell", "command": "true",
            "resources": {"cpu": 0.1, "memory_mb": 64}, "parameters": [{"name": "account"}],
            "limits": [{"limit": limit, "key": "{params.account}"}]}  # fmt: skip
    response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def submit(api: Api, tenant: Tenant, job_id: str, key: str) -> str:
    body = {"params": {"account": key}}
    response = api.http.post(f"/v1/jobs/{job_id}/runs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def states(api: Api, tenant: Tenant, *run_ids: str) -> list[str]:
    return [run_of(api, tenant, run_id)["state"] for run_id in run_ids]


def test_a_full_key_holds_its_runs_while_other_keys_start(api: Api) -> None:
    acme = Tenant(api, "acme")
    make_limit(api, acme, "partner-api", max_running=1)
    call = job(api, acme)
    register_worker(api, "w1")
    first, second = (submit(api, acme, call, "acme") for _ in range(2))
    other = submit(api, acme, call, "beta")
    dispatch(api.store)
    assert states(api, acme, first, second, other) == ["running", "queued", "running"]
    assert run_of(api, acme, second)["waiting_reason"].endswith(
        "limit partner-api, key acme: 1 of 1 running"
    )
    assert waiting_kinds(api, "acme") == {"limit": 1}


def test_a_rate_counts_starts_across_passes_and_says_when_the_next_may_go(api: Api) -> None:
    acme = Tenant(api, "acme")
    make_limit(api, acme, "partner-api", rate={"count": 2, "period_seconds": 3600})
    call = job(api, acme)
    register_worker(api, "w1")
    first = submit(api, acme, call, "acme")
    dispatch(api.store)
    later = [submit(api, acme, call, "acme") for _ in range(2)]
    dispatch(api.store)
    assert states(api, acme, first, *later) == ["running", "running", "queued"]
    assert (
        "limit partner-api, key acme: 2/h used, next start at "
        in (run_of(api, acme, later[1])["waiting_reason"])
    )
    with api.store.database.read() as connection:
        recorded = connection.execute(
            select(func.count()).select_from(limit_starts).where(limit_starts.c.key == "acme")
        ).scalar_one()
    assert recorded == 2


def test_a_full_keys_backlog_does_not_hide_another_keys_run(api: Api) -> None:
    acme = Tenant(api, "acme")
    api.http.patch(
        f"/v1/tenants/{acme.id}", headers=api.admin, json={"quotas": {"max_queued": 3}}
    ).raise_for_status()
    make_limit(api, acme, "partner-api", max_running=1)
    call = job(api, acme)
    register_worker(api, "w1")
    backlog = [submit(api, acme, call, "acme") for _ in range(5)]
    late = submit(api, acme, call, "beta")
    dispatch(api.store)  # the key fills: its backlog takes the tenant's window this once
    dispatch(api.store)  # and, held by a full key, no place in it from then on
    assert states(api, acme, backlog[0], late) == ["running", "running"]


def test_the_gauges_count_each_limits_runs_and_its_busiest_keys_only(api: Api) -> None:
    acme = Tenant(api, "acme")
    make_limit(api, acme, "partner-api", max_running=1)
    call = job(api, acme)
    register_worker(api, "w1", cpu=4)
    for index in range(8):  # key k0 has 3 runs, k1 2, the other six 1 each
        for _ in range(3 if index == 0 else 2 if index == 1 else 1):
            submit(api, acme, call, f"k{index}")
    dispatch(api.store)
    samples = scrape(api)
    limit = {"tenant": "acme", "limit": "partner-api"}

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted({**limit, **labels}.items()))))

    assert value("herder_limit_runs", state="running") == 8
    assert value("herder_limit_runs", state="queued") == 3
    assert value("herder_limit_key_runs", key="k0", state="queued") == 2
    keys = {dict(labels)["key"] for (name, labels) in samples if name == "herder_limit_key_runs"}
    assert len(keys) == 5
    assert {"k0", "k1"} <= keys


def test_maintenance_forgets_ended_runs_keys_and_starts_past_the_longest_period(
    api: Api,
) -> None:
    acme = Tenant(api, "acme")
    partner = make_limit(api, acme, "partner-api", max_running=5)
    call = job(api, acme)
    ended, active = (submit(api, acme, call, "acme") for _ in range(2))
    long_ago = datetime.now(UTC) - timedelta(days=40)
    yesterday = datetime.now(UTC) - timedelta(days=1, minutes=1)
    with api.store.database.write() as connection:
        connection.execute(update(runs).where(runs.c.id == ended).values(state="succeeded"))
        connection.execute(
            insert(limit_starts),
            [{"limit_id": partner, "key": "acme", "started_at": at}
             for at in (long_ago, datetime.now(UTC))],
        )  # fmt: skip
        connection.execute(
            insert(limit_last_starts),
            [{"limit_id": partner, "key": key, "started_at": at}
             for key, at in (("acme", datetime.now(UTC)), ("beta", yesterday))],
        )  # fmt: skip
    api.store.history.delete_old_limit_starts()
    with api.store.database.read() as connection:
        keyed = set(connection.execute(select(run_limit_keys.c.run_id)).scalars())
        starts = connection.execute(select(func.count()).select_from(limit_starts)).scalar_one()
        last = set(connection.execute(select(limit_last_starts.c.key)).scalars())
    assert keyed == {active}
    assert starts == 1
    assert last == {"acme"}  # a last start over a day old is as none


def test_the_queue_lists_the_runs_waiting_on_a_limit_and_key(api: Api) -> None:
    acme, other = Tenant(api, "acme"), Tenant(api, "other")
    partner = make_limit(api, acme, "partner-api", max_running=1)
    call = job(api, acme)
    register_worker(api, "w1")
    runs_of = {key: [submit(api, acme, call, key) for _ in range(3)] for key in "ab"}
    dispatch(api.store)

    def queued(headers: dict[str, str], **filters: str) -> list[str]:
        response = api.http.get("/v1/queue", headers=headers, params=filters)
        assert response.status_code == 200, response.text
        return [entry["run_id"] for entry in response.json()["items"]]

    a, b = runs_of["a"], runs_of["b"]
    assert queued(acme.headers, limit_id=partner) == [a[1], b[1], a[2], b[2]]  # turns
    assert queued(acme.headers, limit_id=partner, key="b") == runs_of["b"][1:]
    assert queued(other.headers, limit_id=partner) == []  # another tenant's limit: nothing
    too_long = api.http.get("/v1/queue", headers=acme.headers, params={"key": "k" * 129})
    assert too_long.status_code == 422
