"""Placers that each see part of the fleet (dispatchers of separate partitions, or a report
placing a successor on its own worker) never over-fill what spans the fleet: applying a plan
measures the tenant's in-use quotas and the run's limit keys again under locks, beside each
worker's room, and skips a placement that no longer fits (the run stays queued, and the next
pass says why). On both stores; two placers at once on PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text

from herder.domain.placement.policy import Plan, plan
from herder.domain.placement.snapshot import Snapshot
from herder.store.runs import placing
from herder.store.runs.placement import Applied
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_limits_placement import job as keyed_job
from tests.integration.test_limits_placement import make_limit, states, submit
from tests.integration.test_pools import Tenant
from tests.integration.test_pools_placement import run_of
from tests.waiting import eventually


def seen_by(whole: Snapshot, worker_id: str, run_ids: Sequence[str]) -> Snapshot:
    """What a placer of one partition sees: one worker, and only its own runs queued."""
    return replace(
        whole,
        workers=tuple(worker for worker in whole.workers if worker.id == worker_id),
        queued=tuple(run for run in whole.queued if run.id in run_ids),
    )


def with_quota(api: Api, tenant: Tenant, **quotas: Any) -> None:
    response = api.http.patch(
        f"/v1/tenants/{tenant.id}", headers=api.admin, json={"quotas": quotas}
    )
    assert response.status_code == 200, response.text


def cpu_runs(api: Api, tenant: Tenant, count: int) -> list[str]:
    body = {"name": "work", "runtime": "shell", "command": "true", "resources": {"cpu": 1}}
    response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    started = [
        api.http.post(f"/v1/jobs/{job_id}/runs", headers=tenant.headers, json={})
        for _ in range(count)
    ]
    return [response.json()["id"] for response in started]


def halves(api: Api, run_ids: list[str], workers: tuple[str, str]) -> tuple[Plan, Plan]:
    """Two plans from one moment's view, each of one worker and half the runs."""
    whole = api.store.placement.snapshot()
    middle = len(run_ids) // 2
    one = plan(seen_by(whole, workers[0], run_ids[:middle]))
    two = plan(seen_by(whole, workers[1], run_ids[middle:]))
    return one, two


def test_two_placers_never_pass_a_tenants_cpu_quota_together(api: Api) -> None:
    acme = Tenant(api, "acme")
    with_quota(api, acme, max_cpu=3)
    workers = register_worker(api, "w1", cpu=4), register_worker(api, "w2", cpu=4)
    run_ids = cpu_runs(api, acme, 4)
    one, two = halves(api, run_ids, workers)
    assert len(one.placements) == len(two.placements) == 2  # each alone within the quota
    assert len(api.store.placement.apply(one).placed) == 2
    applied = api.store.placement.apply(two)
    assert [placement.run_id for placement in applied.placed] == [run_ids[2]]
    assert applied.skipped == [run_ids[3]]
    dispatch(api.store)
    waiting = run_of(api, acme, run_ids[3])
    assert waiting["state"] == "queued"
    assert "tenant quota cpu 3/3 in use" in waiting["waiting_reason"]


def test_a_tenant_without_quotas_is_not_held_back_by_the_recheck(api: Api) -> None:
    acme = Tenant(api, "acme")
    workers = register_worker(api, "w1", cpu=4), register_worker(api, "w2", cpu=4)
    run_ids = cpu_runs(api, acme, 4)
    one, two = halves(api, run_ids, workers)
    assert len(api.store.placement.apply(one).placed) == 2
    assert len(api.store.placement.apply(two).placed) == 2


def test_two_placers_never_pass_a_keys_max_running_together(api: Api) -> None:
    acme = Tenant(api, "acme")
    make_limit(api, acme, "partner-api", max_running=1)
    call = keyed_job(api, acme)
    workers = register_worker(api, "w1"), register_worker(api, "w2")
    first, second, other = (submit(api, acme, call, key) for key in ("acme", "acme", "beta"))
    whole = api.store.placement.snapshot()
    one = plan(seen_by(whole, workers[0], [first]))
    two = plan(seen_by(whole, workers[1], [second, other]))
    assert len(api.store.placement.apply(one).placed) == 1
    applied = api.store.placement.apply(two)
    assert [placement.run_id for placement in applied.placed] == [other]
    assert states(api, acme, first, second, other) == ["running", "queued", "running"]


def test_two_placers_never_pass_a_keys_rate_together(api: Api) -> None:
    acme = Tenant(api, "acme")
    make_limit(api, acme, "partner-api", rate={"count": 1, "period_seconds": 3600})
    call = keyed_job(api, acme)
    workers = register_worker(api, "w1"), register_worker(api, "w2")
    first, second = (submit(api, acme, call, "acme") for _ in range(2))
    whole = api.store.placement.snapshot()
    one = plan(seen_by(whole, workers[0], [first]))
    two = plan(seen_by(whole, workers[1], [second]))
    assert len(api.store.placement.apply(one).placed) == 1
    assert api.store.placement.apply(two).placed == []
    dispatch(api.store)
    assert "limit partner-api, key acme: 1/h used" in run_of(api, acme, second)["waiting_reason"]


def test_two_placers_at_once_wait_on_the_tenant_and_never_pass_its_quota(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first holds its locks while the second applies beside it: the second waits for
    the tenant's placement lock, then measures what the first committed."""
    if not api.store.database.is_postgres:
        pytest.skip("two write transactions at once are PostgreSQL's (SQLite has one writer)")
    acme = Tenant(api, "acme")
    with_quota(api, acme, max_cpu=2)
    workers = register_worker(api, "w1", cpu=4), register_worker(api, "w2", cpu=4)
    run_ids = cpu_runs(api, acme, 4)
    one, two = halves(api, run_ids, workers)
    measure = placing._measure_rooms
    second: list[Applied] = []
    racing = threading.Thread(target=lambda: second.append(api.store.placement.apply(two)))

    def the_other_applies_meanwhile(*arguments: Any) -> Any:
        rooms = measure(*arguments)
        if not racing.is_alive() and not second:
            racing.start()
            assert eventually(lambda: waiting_on_a_lock(api) or not racing.is_alive(), 10)
        return rooms

    monkeypatch.setattr(placing, "_measure_rooms", the_other_applies_meanwhile)
    first = api.store.placement.apply(one)
    racing.join(30)
    assert len(first.placed) == 2
    assert second[0].placed == []  # it waited, then found the quota full


def waiting_on_a_lock(api: Api) -> bool:
    with api.store.database.read() as connection:
        waiting = connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()
    return bool(waiting)
