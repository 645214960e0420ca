"""A schedule's fires count against the limits its job and its own spec name, keyed from the
schedule's overrides; a fire whose key cannot be rendered records the schedule's error event
and fires nothing, while the other schedules of the batch fire."""

from __future__ import annotations

from sqlalchemy import select

from herder.app.schedules import fire
from herder.domain.jobs import JobSpec
from herder.domain.limits import LimitReference, LimitSpec, LimitStrategy
from herder.store.jobs import JobEdit
from herder.store.schema import run_limit_keys, runs
from tests.integration.test_firing_batches import read_batch
from tests.integration.test_schedules import Firing, firing  # noqa: F401

PLAIN = JobSpec(runtime="shell", command="true")


def counted(world: Firing, schedule_id: str) -> list[tuple[str, list[list[str]]]]:
    with world.store.database.read() as connection:
        rows = connection.execute(
            select(runs.c.id, runs.c.limit_keys).where(runs.c.schedule_id == schedule_id)
        ).all()
        keyed = connection.execute(select(run_limit_keys.c.run_id, run_limit_keys.c.key)).all()
    by_run = {run_id: key for run_id, key in keyed}
    return [(by_run.get(run_id, ""), limit_keys) for run_id, limit_keys in rows]


def test_a_fire_counts_against_the_key_its_overrides_render(firing: Firing) -> None:  # noqa: F811
    limit = firing.store.limits.create(firing.tenant_id, "partner", LimitSpec(max_running=1))
    reference = LimitReference(limit="partner", key="{env.ACCOUNT}")
    schedule_id = firing.schedule(limits=[reference], overrides={"env": {"ACCOUNT": "acme"}})
    firing.clock.advance(61)
    firing.fire(schedule_id)
    assert counted(firing, schedule_id) == [("acme", [[limit.id, "acme"]])]


def test_a_fire_that_cannot_render_its_key_records_an_error_and_others_fire(
    firing: Firing,  # noqa: F811
) -> None:
    firing.store.limits.create(firing.tenant_id, "partner", LimitSpec(max_running=1))
    broken = firing.schedule()
    elsewhere = Firing(
        firing.store,
        firing.clock,
        firing.store.access.create_tenant("elsewhere").id,
        "",
    )
    elsewhere.job_id = firing.store.jobs.create(elsewhere.tenant_id, "j", PLAIN).id
    fine = elsewhere.schedule()
    named = PLAIN.model_copy(
        update={"limits": [LimitReference(limit="partner", key="{env.REGION}")]}
    )
    firing.store.jobs.edit(firing.tenant_id, firing.job_id, lambda job: JobEdit(job.name, named))
    firing.clock.advance(61)
    fire(firing.store, read_batch(firing), actor="scheduler:test")
    assert firing.runs(broken) == []
    assert len(elsewhere.runs(fine)) == 1
    [error] = firing.store.schedules.events(firing.tenant_id, broken)
    assert error.kind == "error"
    assert "limits.0.key: env.REGION is not set" in error.message


def test_a_fire_to_a_full_drop_key_is_recorded_skipped_naming_limit_and_key(
    firing: Firing,  # noqa: F811
) -> None:
    spec = LimitSpec(max_running=1, strategy=LimitStrategy.DROP)
    firing.store.limits.create(firing.tenant_id, "partner", spec)
    reference = LimitReference(limit="partner", key="acme")
    schedule_id = firing.schedule(limits=[reference])
    firing.clock.advance(61)
    firing.fire(schedule_id)
    firing.clock.advance(60)
    firing.fire(schedule_id)
    assert len(firing.runs(schedule_id)) == 1  # the first is still queued: the key is full
    [skipped] = firing.store.schedules.events(firing.tenant_id, schedule_id)
    assert skipped.kind == "skipped"
    assert "not fired: limit partner, key acme: 1 of 1 active; strategy drop" in skipped.message
    schedule = firing.store.schedules.get(firing.tenant_id, schedule_id)
    assert (schedule.fired_count, schedule.skipped_count) == (1, 1)
