"""A schedule the firer can no longer evaluate (its zone left the host's tzdata, say) is
recorded as an error on the schedule and stops firing; the firer moves on, never spins."""

from __future__ import annotations

from sqlalchemy import update

from herder.control.firer import MAX_SLEEP_SECONDS, Firer
from herder.store.schedules import PARTITIONS, partition_of
from herder.store.schema import schedules
from tests.integration.test_schedules import Firing, firing  # noqa: F401


def break_zone(world: Firing, schedule_id: str) -> None:
    spec = world.store.schedules.get(world.tenant_id, schedule_id).spec
    broken = spec.model_dump(mode="json") | {"timezone": "Nowhere/Atlantis"}
    with world.store.database.write() as connection:
        connection.execute(
            update(schedules).where(schedules.c.id == schedule_id).values(spec=broken)
        )


def test_an_unevaluable_schedule_is_an_error_event_and_the_others_still_fire(
    firing: Firing,  # noqa: F811
) -> None:
    broken = firing.schedule(timezone="Europe/Paris")
    healthy = firing.schedule()
    break_zone(firing, broken)
    firing.clock.advance(60)
    for partition in range(PARTITIONS):
        Firer(firing.store, firing.clock, partition).step()
    assert len(firing.runs(healthy)) == 1
    assert firing.runs(broken) == []
    (event,) = firing.store.schedules.events(firing.tenant_id, broken)
    assert event.kind == "error"
    assert "Nowhere/Atlantis" in event.message
    assert "stopped firing" in event.message
    assert firing.store.schedules.get(firing.tenant_id, broken).next_fire_at is None
    # nothing left due in its partition: the firer sleeps instead of retrying it at once
    firing.clock.advance(1)
    again = Firer(firing.store, firing.clock, partition_of(broken)).step()
    assert again > 0
    assert again <= MAX_SLEEP_SECONDS
    assert len(firing.store.schedules.events(firing.tenant_id, broken)) == 1
