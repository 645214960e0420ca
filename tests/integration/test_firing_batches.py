"""A batch of due schedules fired in one unit of work: the schedules another firer moved on
meanwhile fire nothing, the others fire once, and each keeps its own concurrency policy."""

from __future__ import annotations

from sqlalchemy import select, update

from herder.app.schedules import fire
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.models import Schedule
from herder.domain.schedules import FirePlan, plan_fires
from herder.domain.states import RunState
from herder.store.firing import DueSchedule
from herder.store.schedules import PARTITIONS
from herder.store.schema import runs, schedules
from tests.integration.test_schedules import Firing, firing, minute  # noqa: F401


def read_batch(world: Firing) -> list[tuple[DueSchedule, FirePlan]]:
    """What firers read and planned now, every partition in one batch."""
    now = world.clock.now()
    batch = []
    for partition in range(PARTITIONS):
        for due in world.store.schedules.due(partition, now, 1000):
            expression = CronExpression.parse(due.spec.cron)
            zone = parse_timezone(due.spec.timezone)
            batch.append((due, plan_fires(expression, zone, due.spec, due.next_fire_at, now)))
    return batch


def schedule(world: Firing, schedule_id: str) -> Schedule:
    return world.store.schedules.get(world.tenant_id, schedule_id)


def kinds(world: Firing, schedule_id: str) -> list[str]:
    return [event.kind for event in world.store.schedules.events(world.tenant_id, schedule_id)]


def states(world: Firing, schedule_id: str) -> list[RunState]:
    with world.store.database.read() as connection:
        rows = connection.execute(
            select(runs.c.state).where(runs.c.schedule_id == schedule_id).order_by(runs.c.id)
        ).scalars()
        return [RunState(state) for state in rows]


def test_schedules_another_firer_moved_on_meanwhile_fire_nothing_the_rest_once(
    firing: Firing,  # noqa: F811
) -> None:
    start = firing.clock.now()
    ids = [firing.schedule() for _ in range(4)]
    firing.clock.advance(60 * 3 + 5)  # two fires missed, the third runs
    stale = read_batch(firing)
    faster = [(due, plan) for due, plan in stale if due.id in ids[:2]]
    assert fire(firing.store, faster, actor="scheduler:other") == 2
    assert fire(firing.store, stale, actor="scheduler:late") == 2
    assert fire(firing.store, stale, actor="scheduler:later") == 0
    for schedule_id in ids:
        assert firing.runs(schedule_id) == [minute(start, 3)]
        fired = schedule(firing, schedule_id)
        assert (fired.fired_count, fired.missed_count) == (1, 2)
        assert fired.last_fired_for == minute(start, 3)
        assert fired.next_fire_at == minute(start, 4)
        assert kinds(firing, schedule_id) == ["missed"]


def test_one_batch_keeps_each_schedules_concurrency_policy(
    firing: Firing,  # noqa: F811
) -> None:
    start = firing.clock.now()
    allow = firing.schedule()
    forbid = firing.schedule(concurrency_policy="forbid")
    replace = firing.schedule(concurrency_policy="replace")
    for _ in range(2):
        firing.clock.advance(60)
        fire(firing.store, read_batch(firing), actor="scheduler:t")
    assert states(firing, allow) == [RunState.QUEUED, RunState.QUEUED]
    assert states(firing, forbid) == [RunState.QUEUED]
    assert states(firing, replace) == [RunState.CANCELLED, RunState.QUEUED]
    counts = [schedule(firing, one) for one in (allow, forbid, replace)]
    assert [(one.fired_count, one.skipped_count) for one in counts] == [(2, 0), (1, 1), (2, 0)]
    assert [one.last_fired_for for one in counts] == [minute(start, n) for n in (2, 1, 2)]
    assert kinds(firing, allow) == []
    (skipped,) = firing.store.schedules.events(firing.tenant_id, forbid)
    assert (skipped.kind, skipped.scheduled_for) == ("skipped", minute(start, 2))
    assert kinds(firing, replace) == ["replaced"]


def test_a_batch_records_each_schedules_misses_and_fires_its_catch_up(
    firing: Firing,  # noqa: F811
) -> None:
    start = firing.clock.now()
    once = firing.schedule()
    skip = firing.schedule(misfire_policy="skip")
    every = firing.schedule(misfire_policy="all", misfire_limit=3)
    on_time = firing.schedule("*/10 * * * *")
    firing.clock.advance(60 * 10 + 5)  # ten minutes down; the ten-minutely one is on time
    assert fire(firing.store, read_batch(firing), actor="scheduler:t") == 5
    assert firing.runs(once) == [minute(start, 10)]
    assert firing.runs(skip) == []
    assert firing.runs(every) == [minute(start, n) for n in (8, 9, 10)]
    assert firing.runs(on_time) == [minute(start, 10)]
    missed = [schedule(firing, one).missed_count for one in (once, skip, every, on_time)]
    assert missed == [9, 10, 7, 0]
    assert kinds(firing, skip) == ["missed"]


def test_a_nominal_time_that_has_its_run_already_is_neither_fired_nor_counted_again(
    firing: Firing,  # noqa: F811
) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule()
    firing.clock.advance(60)
    firing.fire(schedule_id)
    with firing.store.database.write() as connection:  # wound back to the time it fired
        connection.execute(
            update(schedules)
            .where(schedules.c.id == schedule_id)
            .values(next_fire_at=minute(start, 1), next_due_at=minute(start, 1))
        )
    assert fire(firing.store, read_batch(firing), actor="scheduler:t") == 0
    assert firing.runs(schedule_id) == [minute(start, 1)]
    again = schedule(firing, schedule_id)
    assert (again.fired_count, again.last_fired_for) == (1, minute(start, 1))
    assert again.next_fire_at == minute(start, 2)
