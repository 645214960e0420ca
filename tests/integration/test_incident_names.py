"""An incident says what failed by the name people know it by — "job nightly-report failed 3
times in a row" — in the store and in the webhook it sends, on both stores."""

from __future__ import annotations

import json
from datetime import timedelta

from herder.app.workflows import start as start_workflow_run
from herder.control.firer import Firer
from herder.domain.alerts.rules import RuleKind
from herder.domain.jobs import JobSpec
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import AttemptState
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.schedules import PARTITIONS
from tests.integration.test_alert_deliveries import World, world  # noqa: F401 (the fixture)

SHELL = JobSpec.model_validate({"runtime": "shell", "command": "true"})


def summaries(world: World) -> list[str]:  # noqa: F811 (the fixture's name)
    return [one.summary for one in world.store.alert_history.incidents(world.tenant_id).items]


def test_a_failing_job_is_named_in_its_incident_and_its_webhook(world: World) -> None:  # noqa: F811
    channel_id, _ = world.channel()
    job_id = world.store.jobs.create(world.tenant_id, "nightly-report", SHELL).id
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id, consecutive=3)
    failed = [world.end_run(job_id, AttemptState.FAILED) for _ in range(3)]
    world.evaluator.step()
    expected = f"job nightly-report failed 3 times in a row (last: {failed[-1]} failed)"
    assert summaries(world) == [expected]
    world.sender.step()
    (sent,) = world.receiver.requests
    assert json.loads(sent.body)["incident"]["summary"] == expected
    recovered = world.end_run(job_id, AttemptState.SUCCEEDED)
    world.evaluator.step()
    (incident,) = world.store.alert_history.incidents(world.tenant_id).items
    assert incident.resolution == f"job nightly-report recovered: {recovered} succeeded"


def test_a_failing_workflow_and_a_missing_schedule_are_named(world: World) -> None:  # noqa: F811
    channel_id, _ = world.channel()
    job = world.store.jobs.create(world.tenant_id, "extract", SHELL)
    spec = WorkflowSpec.model_validate({"tasks": [{"name": "a", "job": job.name}]})
    workflow = world.store.workflows.create(world.tenant_id, "etl", spec)
    world.rule(channel_id, RuleKind.WORKFLOW_FAILED, workflow_id=workflow.id)
    start_workflow_run(world.store, world.tenant_id, workflow.id, {})
    world.end_queued(AttemptState.FAILED)
    world.evaluator.step()
    (flow,) = summaries(world)
    assert flow.startswith("workflow etl failed (wfrun_")

    first = world.clock.now() + timedelta(minutes=1)
    schedule = world.store.schedules.create(
        world.tenant_id, job.id, ScheduleSpec(cron="* * * * *"), first, name="nightly-etl"
    )
    world.rule(channel_id, RuleKind.SCHEDULE_MISSED, schedule_id=schedule.id)
    world.clock.advance(10 * 60)  # no scheduler ran for ten minutes
    for partition in range(PARTITIONS):
        Firer(world.store, world.clock, partition).step()
    world.evaluator.step()
    missed = [summary for summary in summaries(world) if summary.startswith("schedule")]
    assert len(missed) == 1
    assert missed[0].startswith("schedule nightly-etl missed or skipped ")
