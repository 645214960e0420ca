"""Cron firing with real scheduler processes on PostgreSQL: every fire exactly once through
a kill, and each misfire policy applied exactly after downtime. Schedules fire every second
(the server allows a seconds field here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

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


@pytest.mark.parametrize(
    ("policy", "runs_after_downtime"),
    [("run_once", 1), ("skip", 0), ("all", 5)],
)
def test_a_restart_after_downtime_applies_the_misfire_policy(
    system_postgres_url: str,
    start_cluster: Callable[..., Cluster],
    policy: str,
    runs_after_downtime: int,
) -> None:
    cluster = start_cluster(
        system_postgres_url, scheduler=False, fast=True, environment=SECONDS_AND_SHORT_GRACE
    )
    scheduler = cluster.spawn("scheduler")
    with cluster.client() as herder:
        job = herder.create_job("tick", {"runtime": "shell", "command": "true"})
        spec = {"cron": EVERY_SECOND, "misfire_policy": policy, "misfire_limit": 5}
        schedule = herder.create_schedule(job.id, spec)
        wait_until(lambda: herder.get_schedule(schedule.id).fired_count >= 2, 20, "firing")
        scheduler.kill()
        time.sleep(1)
        before = herder.get_schedule(schedule.id)
        time.sleep(10)  # down: about ten fires come and go
        cluster.spawn("scheduler")
        wait_until(lambda: herder.get_schedule(schedule.id).missed_count > 0, 20, "misses seen")
        after = herder.get_schedule(schedule.id)
        events = herder.schedule_events(schedule.id)
    (missed,) = [event for event in events if event.kind == "missed"]
    assert before.last_fired_for is not None
    assert missed.scheduled_for is not None  # the last instant missed
    # The catch-up: after the last fire before the kill, up to the instants the policy fired
    # after the last one missed (one a second); the restarted scheduler's own fires follow.
    # (Not up to ``missed.at``: that is when the pass committed, which may be after the
    # instant of the next regular fire.)
    last_caught_up = missed.scheduled_for + timedelta(seconds=runs_after_downtime)
    database = Database(system_postgres_url)
    with database.read() as connection:
        catch_up = connection.execute(
            select(runs.c.scheduled_for).where(
                runs.c.schedule_id == schedule.id,
                runs.c.scheduled_for > before.last_fired_for,
                runs.c.scheduled_for <= last_caught_up,
            )
        ).all()
    database.dispose()
    assert len(catch_up) == runs_after_downtime, (policy, catch_up)
    assert after.missed_count >= 8 - runs_after_downtime
    assert after.fired_count - before.fired_count >= runs_after_downtime
