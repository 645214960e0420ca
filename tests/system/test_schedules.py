"""Cron firing with real scheduler processes on PostgreSQL: every fire exactly once through
a kill, and each misfire policy applied exactly after downtime. Schedules fire every second
(the server allows a seconds field here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from herder.domain.models import Schedule, ScheduleEvent
from herder.store.database import Database
from herder.store.schema import runs
from tests.system.conftest import Cluster, wait_until

pytestmark = [pytest.mark.system, pytest.mark.postgres]

EVERY_SECOND = "* * * * * *"
SECONDS = {"HERDER_CRON_SECONDS": "1"}  # a takeover's late fires still count as on time
SECONDS_AND_SHORT_GRACE = {**SECONDS, "HERDER_MISFIRE_GRACE": "2"}  # 10 s down = misses


def fires_by_schedule(url: str) -> dict[str, list[datetime]]:
    database = Database(url)
    with database.read() as connection:
        rows = connection.execute(
            select(runs.c.schedule_id, runs.c.scheduled_for).where(runs.c.schedule_id.is_not(None))
        ).all()
    database.dispose()
    assert len(rows) == len(set(rows)), "a (schedule, fire time) has two runs"
    fires: dict[str, list[datetime]] = {}
    for schedule_id, moment in rows:
        fires.setdefault(schedule_id, []).append(moment)
    return {key: sorted(value) for key, value in fires.items()}


def test_two_schedulers_fire_every_second_exactly_once_through_a_kill(
    system_postgres_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(system_postgres_url, scheduler=False, fast=True, environment=SECONDS)
    schedulers = [cluster.spawn("scheduler") for _ in range(2)]
    with cluster.client() as herder:
        job = herder.create_job("tick", {"runtime": "shell", "command": "true"})
        ids = [herder.create_schedule(job.id, {"cron": EVERY_SECOND}).id for _ in range(200)]
    started = datetime.now(UTC)
    time.sleep(5)
    schedulers[0].kill()  # kill -9: its partitions wait for their leases to expire
    time.sleep(3)
    cluster.spawn("scheduler")  # and a restarted one joins
    time.sleep(5)
    window_start = (started + timedelta(seconds=2)).replace(microsecond=0)
    window_end = (datetime.now(UTC) - timedelta(seconds=2)).replace(microsecond=0)
    wait_until(
        lambda: all(
            fires and fires[-1] >= window_end
            for fires in fires_by_schedule(system_postgres_url).values()
        ),
        20,
        "every schedule caught up",
    )
    fires = fires_by_schedule(system_postgres_url)
    expected = [
        window_start + timedelta(seconds=offset)
        for offset in range(int((window_end - window_start).total_seconds()) + 1)
    ]
    assert set(fires) == set(ids)
    for schedule_id in ids:
        in_window = [
            moment for moment in fires[schedule_id] if window_start <= moment <= window_end
        ]
        assert in_window == expected, schedule_id


MISFIRE_POLICIES = {"run_once": 1, "skip": 0, "all": 5}  # and the runs each makes on restart


def test_a_restart_after_downtime_applies_each_misfire_policy(
    system_postgres_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    """One schedule per policy, through the same outage."""
    cluster = start_cluster(
        system_postgres_url, scheduler=False, fast=True, environment=SECONDS_AND_SHORT_GRACE
    )
    scheduler = cluster.spawn("scheduler")
    with cluster.client() as herder:
        job = herder.create_job("tick", {"runtime": "shell", "command": "true"})
        ids = {
            policy: herder.create_schedule(
                job.id, {"cron": EVERY_SECOND, "misfire_policy": policy, "misfire_limit": 5}
            ).id
            for policy in MISFIRE_POLICIES
        }
        wait_until(
            lambda: all(herder.get_schedule(i).fired_count >= 2 for i in ids.values()), 20, "firing"
        )
        scheduler.kill()
        time.sleep(1)
        before = {policy: herder.get_schedule(ids[policy]) for policy in ids}
        time.sleep(10)  # down: about ten fires come and go
        cluster.spawn("scheduler")
        # more misses than before the outage: a scheduler slow to start under load may have
        # recorded some of its first fires missed already
        wait_until(
            lambda: all(
                herder.get_schedule(ids[policy]).missed_count > before[policy].missed_count
                for policy in ids
            ),
            20,
            "the outage's misses",
        )
        after = {policy: herder.get_schedule(ids[policy]) for policy in ids}
        events = {policy: herder.schedule_events(ids[policy]) for policy in ids}
    for policy, runs_after_downtime in MISFIRE_POLICIES.items():
        _check_catch_up(
            system_postgres_url, policy, runs_after_downtime, before[policy], after[policy],
            events[policy],
        )  # fmt: skip


def _check_catch_up(
    url: str,
    policy: str,
    runs_after_downtime: int,
    before: Schedule,
    after: Schedule,
    events: list[ScheduleEvent],
) -> None:
    assert before.last_fired_for is not None
    # the outage's misses (a scheduler slow to start under load may miss its first fires too)
    (missed,) = [
        event
        for event in events
        if event.kind == "missed"
        and event.scheduled_for is not None
        and event.scheduled_for > before.last_fired_for
    ]
    assert missed.scheduled_for is not None  # the last instant missed
    # The catch-up: after the last fire before the kill, up to the instants the policy fired
    # after the last one missed (one a second); the restarted scheduler's own fires follow.
    # (Not up to ``missed.at``: that is when the pass committed, which may be after the
    # instant of the next regular fire.)
    last_caught_up = missed.scheduled_for + timedelta(seconds=runs_after_downtime)
    database = Database(url)
    with database.read() as connection:
        catch_up = connection.execute(
            select(runs.c.scheduled_for).where(
                runs.c.schedule_id == before.id,
                runs.c.scheduled_for > before.last_fired_for,
                runs.c.scheduled_for <= last_caught_up,
            )
        ).all()
    database.dispose()
    assert len(catch_up) == runs_after_downtime, (policy, catch_up)
    assert after.missed_count - before.missed_count >= 8 - runs_after_downtime, policy
    assert after.fired_count - before.fired_count >= runs_after_downtime, policy
