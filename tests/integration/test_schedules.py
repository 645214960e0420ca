"""Schedules over the API, and firing them on a store whose clock the test moves."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from herder.control.firer import Firer
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.jobs import JobSpec
from herder.domain.schedules import ScheduleSpec, first_fire, jitter_offset
from herder.domain.states import RunState
from herder.store.schedules import partition_of
from herder.store.schema import runs
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api

# --- the API --------------------------------------------------------------------------


def create(api: Api, **body: object) -> dict[str, Any]:
    job = api.create_job(f"j{random.random()}")
    response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "0 * * * *", **body}
    )
    assert response.status_code == 201, response.text
    schedule: dict[str, Any] = response.json()
    return schedule


def test_a_schedule_is_created_with_its_next_fire(api: Api) -> None:
    schedule = create(api, cron="30 2 * * *", timezone="Europe/London")
    assert schedule["spec"]["misfire_policy"] == "run_once"
    assert schedule["spec"]["concurrency_policy"] == "allow"
    next_fire = datetime.fromisoformat(str(schedule["next_fire_at"]))
    assert next_fire > datetime.now(UTC)
    fires = api.http.get(f"/v1/schedules/{schedule['id']}/next?count=3", headers=api.admin).json()
    assert len(fires["fires"]) == 3
    assert all(fire["local"][11:16] == "02:30" for fire in fires["fires"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "61 * * * *"}, "cron.minute"),
        ({"cron": "0 0 * * 8"}, "cron.day-of-week"),
        ({"cron": "* * *"}, "cron.expression"),
        ({"cron": "0 0 30 2 *"}, "cron"),  # never fires
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"misfire_policy": "sometimes"}, "misfire_policy"),
        ({"jitter_seconds": 99999}, "jitter_seconds"),
    ],
)
def test_invalid_schedules_get_422_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    job = api.create_job(f"j{random.random()}")
    full = {"job_id": job["id"], "cron": "0 * * * *", **body}
    response = api.http.post("/v1/schedules", headers=api.admin, json=full)
    assert response.status_code == 422, response.text
    problem = response.json()
    fields = [problem.get("field")] + [error["field"] for error in problem.get("errors", [])]
    assert field in fields, problem


def test_a_schedule_is_listed_changed_paused_resumed_and_deleted(api: Api) -> None:
    schedule = create(api)
    url = f"/v1/schedules/{schedule['id']}"
    assert [
        item["id"] for item in api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    ] == [schedule["id"]]
    changed = api.http.patch(url, headers=api.admin, json={"cron": "*/5 * * * *"}).json()
    assert changed["spec"]["cron"] == "*/5 * * * *"
    paused = api.http.post(f"{url}/pause", headers=api.admin).json()
    assert paused["paused"] is True
    assert paused["next_fire_at"] is None
    resumed = api.http.post(f"{url}/resume", headers=api.admin).json()
    assert resumed["next_fire_at"] is not None
    kinds = [event["kind"] for event in api.http.get(f"{url}/events", headers=api.admin).json()]
    assert kinds == ["updated", "paused", "resumed"]
    other = api.as_key(api.other_tenant_key())
    assert api.http.get(url, headers=other).status_code == 404
    assert api.http.delete(url, headers=api.admin).status_code == 204
    assert api.http.get(url, headers=api.admin).status_code == 404


def test_concurrent_changes_of_a_schedule_each_keep_the_others(api: Api) -> None:
    url = f"/v1/schedules/{create(api)['id']}"
    changes: list[dict[str, object]] = [
        {"cron": "*/5 * * * *"},
        {"jitter_seconds": 30},
        {"misfire_policy": "skip"},
        {"concurrency_policy": "forbid"},
    ]
    start = threading.Barrier(len(changes))

    def send(change: dict[str, object]) -> int:
        start.wait(timeout=10)
        return int(api.http.patch(url, headers=api.admin, json=change).status_code)

    with ThreadPoolExecutor(len(changes)) as pool:
        assert list(pool.map(send, changes)) == [200] * len(changes)
    spec = api.http.get(url, headers=api.admin).json()["spec"]
    assert all(spec[field] == value for change in changes for field, value in change.items())
    kinds = [event["kind"] for event in api.http.get(f"{url}/events", headers=api.admin).json()]
    assert kinds == ["updated"] * len(changes)


def test_a_change_that_breaks_the_merged_schedule_is_422_and_changes_nothing(api: Api) -> None:
    schedule = create(api)
    url = f"/v1/schedules/{schedule['id']}"
    response = api.http.patch(url, headers=api.admin, json={"jitter_seconds": 99999})
    assert response.status_code == 422
    assert [error["field"] for error in response.json()["errors"]] == ["jitter_seconds"]
    assert api.http.get(url, headers=api.admin).json() == schedule
    assert api.http.get(f"{url}/events", headers=api.admin).json() == []


def test_a_job_with_schedules_cannot_be_deleted(api: Api) -> None:
    schedule = create(api)
    response = api.http.delete(f"/v1/jobs/{schedule['job_id']}", headers=api.admin)
    assert response.status_code == 409
    assert "schedule" in response.json()["detail"]


@pytest.mark.parametrize("policy", ["forbid", "replace"])
def test_a_manual_run_can_ask_for_its_schedules_concurrency_policy(api: Api, policy: str) -> None:
    schedule = create(api, concurrency_policy=policy)
    url = f"/v1/jobs/{schedule['job_id']}/runs"
    as_schedule = {"schedule_id": schedule["id"]}
    first = api.http.post(url, headers=api.admin, json=as_schedule)
    assert first.status_code == 201
    second = api.http.post(url, headers=api.admin, json=as_schedule)
    if policy == "forbid":
        assert second.status_code == 409
        assert "forbids concurrent runs" in second.json()["detail"]
    else:
        assert second.status_code == 201
        old = api.http.get(f"/v1/runs/{first.json()['id']}", headers=api.admin).json()
        assert old["state"] == "cancelled"
    unasked = api.http.post(url, headers=api.admin)  # without asking: no policy applies
    assert unasked.status_code == 201


def test_an_unsaved_expression_is_previewed_in_utc_and_its_zone(api: Api) -> None:
    body = {"cron": "0 9 * * MON-FRI", "timezone": "America/New_York", "count": 5,
            "after": "2026-11-20T00:00:00Z"}  # fmt: skip
    fires = api.http.post("/v1/cron/preview", headers=api.admin, json=body).json()["fires"]
    assert [fire["local"][:16] for fire in fires] == [
        "2026-11-20T09:00", "2026-11-23T09:00", "2026-11-24T09:00", "2026-11-25T09:00",
        "2026-11-26T09:00",
    ]  # fmt: skip
    assert fires[0]["utc"].startswith("2026-11-20T14:00")


# --- firing ---------------------------------------------------------------------------


@dataclass
class Firing:
    store: Store
    clock: ManualClock
    tenant_id: str
    job_id: str

    def schedule(self, cron: str = "* * * * *", **spec: object) -> str:
        full = ScheduleSpec.model_validate({"cron": cron, **spec})
        expression = CronExpression.parse(full.cron, allow_seconds=True)
        first = first_fire(expression, parse_timezone(full.timezone), full, self.clock.now())
        return self.store.schedules.create(self.tenant_id, self.job_id, full, first).id

    def fire(self, schedule_id: str, firers: int = 1) -> None:
        partition = partition_of(schedule_id)
        for _ in range(firers):
            Firer(self.store, self.clock, partition).step()

    def runs(self, schedule_id: str) -> list[datetime]:
        """The nominal times this schedule made runs for."""
        with self.store.database.read() as connection:
            rows = connection.execute(
                select(runs.c.scheduled_for)
                .where(runs.c.schedule_id == schedule_id)
                .order_by(runs.c.scheduled_for)
            ).scalars()
            return list(rows)


@pytest.fixture
def firing(database_url: str) -> Iterator[Firing]:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    tenant = store.access.create_tenant("t").id
    job = store.jobs.create(tenant, "j", JobSpec(runtime="shell", command="true")).id
    yield Firing(store, clock, tenant, job)
    store.close()


def minute(moment: datetime, offset: int) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=offset)


def test_each_fire_happens_once_however_many_firers_try(firing: Firing) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule()
    for _ in range(5):
        firing.clock.advance(60)
        firing.fire(schedule_id, firers=3)
    assert firing.runs(schedule_id) == [minute(start, n) for n in range(1, 6)]


def test_missed_fires_run_once_by_default_and_are_counted(firing: Firing) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule()
    firing.clock.advance(60 * 30 + 5)  # all schedulers were down for half an hour
    firing.fire(schedule_id)
    assert firing.runs(schedule_id) == [minute(start, 30)]
    schedule = firing.store.schedules.get(firing.tenant_id, schedule_id)
    assert schedule.missed_count == 29
    events = firing.store.schedules.events(firing.tenant_id, schedule_id)
    assert [event.kind for event in events] == ["missed"]
    assert "29 fire(s) missed" in events[0].message
    assert schedule.next_fire_at == minute(start, 31)


def test_missed_fires_can_be_skipped_or_all_run_up_to_a_limit(firing: Firing) -> None:
    start = firing.clock.now()
    skip = firing.schedule(misfire_policy="skip")
    every = firing.schedule(misfire_policy="all", misfire_limit=10)
    firing.clock.advance(60 * 30 + 5)
    firing.fire(skip)
    firing.fire(every)
    assert firing.runs(skip) == []
    assert firing.store.schedules.get(firing.tenant_id, skip).missed_count == 30
    assert firing.runs(every) == [minute(start, n) for n in range(21, 31)]
    assert firing.store.schedules.get(firing.tenant_id, every).missed_count == 20


def test_a_schedule_keeps_firing_after_many_misses(firing: Firing) -> None:
    schedule_id = firing.schedule()
    firing.clock.advance(86400 * 7)  # a week down: ~10,000 misses
    firing.fire(schedule_id)
    for _ in range(3):
        firing.clock.advance(60)
        firing.fire(schedule_id)
    assert len(firing.runs(schedule_id)) == 4


def test_forbid_skips_a_fire_while_the_previous_run_is_active(firing: Firing) -> None:
    schedule_id = firing.schedule(concurrency_policy="forbid")
    firing.clock.advance(60)
    firing.fire(schedule_id)
    firing.clock.advance(60)
    firing.fire(schedule_id)
    assert len(firing.runs(schedule_id)) == 1
    schedule = firing.store.schedules.get(firing.tenant_id, schedule_id)
    assert schedule.skipped_count == 1
    assert (
        "concurrency policy forbid"
        in firing.store.schedules.events(firing.tenant_id, schedule_id)[-1].message
    )


def test_replace_cancels_the_active_run_and_starts_the_new_one(firing: Firing) -> None:
    schedule_id = firing.schedule(concurrency_policy="replace")
    firing.clock.advance(60)
    firing.fire(schedule_id)
    firing.clock.advance(60)
    firing.fire(schedule_id)
    states = sorted(run.state for run in firing.store.runs.list(firing.tenant_id).items)
    assert states == [RunState.CANCELLED, RunState.QUEUED]


def test_jitter_is_the_same_offset_every_time_for_a_schedule(firing: Firing) -> None:
    schedule_id = firing.schedule(jitter_seconds=50)
    schedule = firing.store.schedules.get(firing.tenant_id, schedule_id)
    offset = jitter_offset(schedule_id, 50)
    assert timedelta(0) <= offset <= timedelta(seconds=50)
    assert schedule.next_fire_at is not None
    assert schedule.next_due_at == schedule.next_fire_at + offset
    offsets = {jitter_offset(f"sch_{n}", 3599).seconds for n in range(1000)}
    assert len(offsets) > 500  # 1,000 hourly schedules do not land on one second
