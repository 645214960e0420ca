"""A firer reads the schedules of the next due instant just before it: they fire at the
instant, not before, and as they are then — a change or a pause after the read wins."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import pytest
from sqlalchemy import select

from herder.control import firer as firer_module
from herder.control.firer import READ_AHEAD_SECONDS, Firer
from herder.domain.models import Schedule
from herder.domain.overrides import RunOverrides
from herder.domain.schedules import ScheduleSpec
from herder.store.schedules import partition_of
from herder.store.schema import runs
from tests.integration.test_schedules import Firing, firing, minute  # noqa: F401


def read_ahead(world: Firing, schedule_id: str) -> Firer:
    """A firer that stepped just before the schedule's first fire (a minute from now)."""
    firer = Firer(world.store, world.clock, partition_of(schedule_id))
    world.clock.advance(60 - 3)
    assert firer.step() == 3 - READ_AHEAD_SECONDS  # wakes to read ahead
    world.clock.advance(3 - READ_AHEAD_SECONDS / 2)
    assert firer.step() == READ_AHEAD_SECONDS / 2  # wakes at the instant
    assert world.runs(schedule_id) == []
    return firer


def run_env(world: Firing, schedule_id: str) -> list[dict[str, str]]:
    with world.store.database.read() as connection:
        specs = connection.execute(select(runs.c.spec).where(runs.c.schedule_id == schedule_id))
        return [spec.get("env", {}) for spec in specs.scalars()]


def test_a_schedule_read_ahead_fires_at_its_instant(firing: Firing) -> None:  # noqa: F811
    start = firing.clock.now()
    schedule_id = firing.schedule()
    firer = read_ahead(firing, schedule_id)
    firing.clock.advance(READ_AHEAD_SECONDS / 2)
    firer.step()
    assert firing.runs(schedule_id) == [minute(start, 1)]


def test_a_change_after_the_read_ahead_fires_as_changed(firing: Firing) -> None:  # noqa: F811
    start = firing.clock.now()
    schedule_id = firing.schedule()
    firer = read_ahead(firing, schedule_id)

    def with_env(current: Schedule) -> tuple[ScheduleSpec, datetime]:
        overrides = RunOverrides(env={"CHANGED": "yes"})
        return current.spec.model_copy(update={"overrides": overrides}), minute(start, 1)

    firing.store.schedules.replace(firing.tenant_id, schedule_id, with_env)
    firing.clock.advance(READ_AHEAD_SECONDS / 2)
    firer.step()
    assert firing.runs(schedule_id) == [minute(start, 1)]
    assert run_env(firing, schedule_id) == [{"CHANGED": "yes"}]


def test_a_pause_after_the_read_ahead_wins(firing: Firing) -> None:  # noqa: F811
    schedule_id = firing.schedule()
    firer = read_ahead(firing, schedule_id)
    firing.store.schedules.pause(firing.tenant_id, schedule_id)
    firing.clock.advance(READ_AHEAD_SECONDS / 2)
    firer.step()
    assert firing.runs(schedule_id) == []


def test_a_burst_larger_than_a_pass_is_read_ahead_whole_and_fired_at_its_instant(
    firing: Firing,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More due at one instant than a pass reads: all of them are read ahead, so none waits
    for a read after the first transaction (issue 29: the burst's last quarter did)."""
    monkeypatch.setattr(firer_module, "BATCH", 2)
    monkeypatch.setattr(firer_module, "READ_AHEAD_LIMIT", 20)
    start = firing.clock.now()
    by_partition: dict[int, list[str]] = defaultdict(list)
    while not any(len(ids) >= 5 for ids in by_partition.values()):
        schedule_id = firing.schedule()
        by_partition[partition_of(schedule_id)].append(schedule_id)
    partition, burst = next((p, ids) for p, ids in by_partition.items() if len(ids) >= 5)
    firer = Firer(firing.store, firing.clock, partition)
    firing.clock.advance(60 - READ_AHEAD_SECONDS / 2)
    firer.step()  # reads the next instant's schedules ahead
    assert all(firing.runs(schedule_id) == [] for schedule_id in burst)
    read_at_instant: list[int] = []
    due = firing.store.schedules.due

    def counted(*args: object) -> object:
        found = due(*args)  # type: ignore[arg-type]
        read_at_instant.append(len(found))
        return found

    monkeypatch.setattr(firing.store.schedules, "due", counted)
    firing.clock.advance(READ_AHEAD_SECONDS / 2)
    firer.step()
    assert all(firing.runs(schedule_id) == [minute(start, 1)] for schedule_id in burst)
    assert read_at_instant == [0]  # the read after the fire found none left
