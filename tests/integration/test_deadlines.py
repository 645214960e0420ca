"""Deadlines on a store whose clock the test moves: a run, a schedule's fire and a workflow
run unfinished past their deadline are found once by the reaper, and cancelled when their
deadline says so; what ended in time is never touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY
from sqlalchemy import select, update

from herder.app import reports
from herder.app.runs import rerun_run
from herder.app.workflows import start as start_workflow_run
from herder.control.firer import Firer
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.deadlines import Deadline
from herder.domain.listings import RunQuery
from herder.domain.models import RunDetail
from herder.domain.schedules import ScheduleSpec, first_fire
from herder.domain.states import AttemptState, RunState
from herder.domain.workflows.spec import WorkflowSpec
from herder.domain.workflows.states import WorkflowRunState
from herder.protocol import Completion
from herder.store.schedules import partition_of
from herder.store.schema import run_events, runs
from tests.integration.test_reaper import World, world  # noqa: F401

MISSED = "deadline missed"


def missed_count() -> float:
    found = REGISTRY.get_sample_value("herder_deadlines_missed_total", {"kind": "run"})
    return found or 0.0


def job(world: World, deadline: dict[str, Any] | None = None) -> str:  # noqa: F811
    return world.job(command="sleep 600", deadline=deadline)


def detail(world: World, run_id: str) -> RunDetail:  # noqa: F811
    return world.store.runs.detail(world.tenant_id, run_id)


def missed_lines(world: World, run_id: str) -> list[str]:  # noqa: F811
    return [e.message for e in detail(world, run_id).events if e.message.startswith(MISSED)]


def finish(world: World, worker_id: str, run_id: str) -> None:  # noqa: F811
    attempt = detail(world, run_id).attempts[-1]
    done = Completion(attempt_id=attempt.id, attempt=attempt.number,
                      outcome=AttemptState.SUCCEEDED, exit_code=0, reason="exit 0")  # fmt: skip
    reports.report(world.store, worker_id, [], [done])


def test_a_running_run_past_its_deadline_is_reported_once_and_keeps_running(
    world: World,  # noqa: F811
) -> None:
    run_id = world.submit(job(world, {"within_seconds": 1}))
    world.claim(world.worker())
    assert detail(world, run_id).deadline_at == world.clock.now() + timedelta(seconds=1)
    world.reap()
    assert missed_lines(world, run_id) == []
    world.clock.advance(2)
    counted = missed_count()
    for _ in range(3):
        world.reap()
    assert missed_count() - counted == 1
    assert missed_lines(world, run_id) == [
        f"{MISSED}: not finished by {world.clock.now() - timedelta(seconds=1):%Y-%m-%d %H:%M:%S}"
        " UTC (1s after its submission)"
    ]
    run = detail(world, run_id)
    assert (run.state, run.cancel_requested) == (RunState.RUNNING, False)
    assert run.deadline_missed_at == world.clock.now()


def test_a_deadline_that_cancels_ends_a_queued_run_and_stops_a_running_one(
    world: World,  # noqa: F811
) -> None:
    running = world.submit(job(world, {"within_seconds": 5, "cancel": True}))
    world.claim(world.worker())
    queued = world.submit(job(world, {"within_seconds": 5, "cancel": True}))
    world.clock.advance(6)
    world.reap()
    assert detail(world, queued).state is RunState.CANCELLED
    assert "deadline" in (detail(world, queued).reason or "")
    stopping = detail(world, running)
    assert (stopping.state, stopping.cancel_requested) == (RunState.RUNNING, True)
    assert len(missed_lines(world, running)) == len(missed_lines(world, queued)) == 1


def test_a_run_that_ended_in_time_or_has_no_deadline_is_never_touched(world: World) -> None:  # noqa: F811
    in_time = world.submit(job(world, {"within_seconds": 60, "cancel": True}))
    worker = world.worker()
    world.claim(worker)
    finish(world, worker, in_time)
    without = world.submit(job(world))
    world.clock.advance(3600)
    world.reap()
    assert detail(world, in_time).state is RunState.SUCCEEDED
    assert detail(world, without).deadline_at is None
    assert missed_lines(world, in_time) == missed_lines(world, without) == []


def test_a_rerun_counts_its_deadline_from_its_own_submission(world: World) -> None:  # noqa: F811
    first = world.submit(job(world, {"within_seconds": 60, "cancel": True}))
    world.clock.advance(61)
    world.reap()
    world.clock.advance(100)
    again = rerun_run(world.store, world.tenant_id, first)
    assert again.deadline_at == world.clock.now() + timedelta(seconds=60)


def test_a_schedules_fire_counts_its_deadline_in_local_time_from_its_nominal_time(
    world: World,  # noqa: F811
) -> None:
    """02:00 Paris on the night clocks go back, + 5 h: 07:00 Paris, six real hours on."""
    world.clock.moment = datetime(2026, 10, 24, 23, 59, tzinfo=UTC)  # 01:59 Paris
    spec = ScheduleSpec(cron="0 2 * * *", timezone="Europe/Paris",
                        deadline=Deadline(within_seconds=5 * 3600))  # fmt: skip
    job_id = job(world, {"within_seconds": 60})  # the schedule's deadline wins
    first = first_fire(CronExpression.parse(spec.cron), parse_timezone(spec.timezone), spec,
                       world.clock.now())  # fmt: skip
    schedule = world.store.schedules.create(world.tenant_id, job_id, spec, first)
    world.clock.advance(120)
    Firer(world.store, world.clock, partition_of(schedule.id)).step()
    (run,) = world.store.runs.list(world.tenant_id, RunQuery(job_id=job_id)).items
    assert run.deadline_at == datetime.fromisoformat("2026-10-25T07:00+01:00")
    world.clock.moment = datetime.fromisoformat("2026-10-25T07:01+01:00")
    world.reap()
    assert missed_lines(world, run.id) == [
        f"{MISSED}: not finished by 2026-10-25 07:00 Europe/Paris (5h after its 02:00 fire)"
    ]


def test_a_workflow_run_carries_the_deadline_and_its_tasks_runs_none(world: World) -> None:  # noqa: F811
    job(world)
    job_name = world.store.jobs.list(world.tenant_id).items[0].name
    spec = WorkflowSpec.model_validate(
        {"tasks": [{"name": "a", "job": job_name}],
         "deadline": {"within_seconds": 600, "cancel": True}}
    )  # fmt: skip
    workflow = world.store.workflows.create(world.tenant_id, "wf", spec)
    started, _ = start_workflow_run(world.store, world.tenant_id, workflow.id, {})
    assert started.deadline_at == world.clock.now() + timedelta(seconds=600)
    (task_run,) = world.store.runs.list(world.tenant_id).items
    assert task_run.deadline_at is None
    world.clock.advance(601)
    world.reap()
    ended = world.store.workflow_runs.get(world.tenant_id, started.id)
    assert ended.deadline_missed_at == world.clock.now()
    assert ended.state is WorkflowRunState.CANCELLED
    assert detail(world, task_run.id).state is RunState.CANCELLED


def test_a_stored_deadline_its_model_refuses_is_told_and_stops_no_pass(
    world: World,  # noqa: F811
) -> None:
    broken = world.submit(job(world, {"within_seconds": 5, "cancel": True}))
    fine = world.submit(job(world, {"within_seconds": 5, "cancel": True}))
    with world.store.database.write() as connection:
        spec = connection.execute(select(runs.c.spec).where(runs.c.id == broken)).scalar_one()
        connection.execute(
            update(runs).where(runs.c.id == broken)
            .values(spec=spec | {"deadline": {"within_seconds": -1}})
        )  # fmt: skip
    world.clock.advance(6)
    world.reap()
    with world.store.database.read() as connection:  # its row fails its model: read raw
        lines = (
            connection.execute(select(run_events.c.message).where(run_events.c.run_id == broken))
            .scalars()
            .all()
        )
        state = connection.execute(select(runs.c.state).where(runs.c.id == broken)).scalar()
    (line,) = [message for message in lines if message.startswith(MISSED)]
    assert line.endswith("UTC")  # when, without what it was counted from
    assert state == RunState.QUEUED  # a bad deadline cancels nothing
    assert detail(world, fine).state is RunState.CANCELLED


def test_a_delayed_run_counts_its_deadline_from_its_start(world: World) -> None:  # noqa: F811
    run_id = world.submit(job(world, {"within_seconds": 60}), delay_seconds=600)
    assert detail(world, run_id).deadline_at == world.clock.now() + timedelta(seconds=660)
