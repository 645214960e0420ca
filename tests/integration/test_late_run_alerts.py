"""The deadline_missed and running_long alert rules below the API, on a store whose clock the
test moves: an incident per late run, opened once, resolved when that run ends."""

from __future__ import annotations

import random

import pytest

from herder.app import submit as submission
from herder.control.reaper import Reaper
from herder.domain.alerts.rules import IncidentState, RuleKind
from herder.domain.jobs import JobSpec
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState
from herder.store.alerts import late_runs
from tests.integration.test_alert_deliveries import World, world  # noqa: F401


def job(world: World, **spec: object) -> str:  # noqa: F811
    full = JobSpec.model_validate({"runtime": "shell", "command": "sleep 600", **spec})
    return world.store.jobs.create(world.tenant_id, f"j{random.random()}", full).id


def submit(world: World, job_id: str) -> str:  # noqa: F811
    return submission.submit(world.store, world.tenant_id, job_id, RunOverrides())[0].id


def summaries(world: World) -> list[str]:  # noqa: F811
    return [one.summary for one in world.store.alert_history.incidents(world.tenant_id).items]


def test_a_missed_deadline_opens_one_incident_that_resolves_when_the_run_ends(
    world: World,  # noqa: F811
) -> None:
    reaper = Reaper(world.store, world.clock, heartbeat_timeout_seconds=3600)
    channel_id, _ = world.channel()
    job_id = job(world, deadline={"within_seconds": 5})
    world.rule(channel_id, RuleKind.DEADLINE_MISSED, job_id=job_id)
    other = world.rule(channel_id, RuleKind.DEADLINE_MISSED, job_id=job(world))
    run_id = submit(world, job_id)
    (assignment,) = world.start_queued()
    world.clock.advance(6)
    reaper.step()
    for _ in range(3):
        world.evaluator.step()
        world.clock.advance(5)
    assert world.incidents() == [(run_id, IncidentState.OPEN)]
    (summary,) = summaries(world)
    assert summary.startswith(f"run {run_id} of job ")
    assert "missed its deadline: not finished by" in summary
    world.finish(assignment, AttemptState.SUCCEEDED)
    world.evaluator.step()
    assert world.incidents() == [(run_id, IncidentState.RESOLVED)]
    assert not world.store.alert_history.incidents(world.tenant_id, rule_id=other).items


def test_a_run_its_deadline_cancelled_still_opens_an_incident_then_resolves(
    world: World,  # noqa: F811
) -> None:
    reaper = Reaper(world.store, world.clock, heartbeat_timeout_seconds=3600)
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.DEADLINE_MISSED)
    run_id = submit(world, job(world, deadline={"within_seconds": 5, "cancel": True}))
    world.clock.advance(6)
    reaper.step()  # missed and cancelled (it was queued) in one pass
    world.evaluator.step()
    assert world.incidents() == [(run_id, IncidentState.OPEN)]
    world.clock.advance(5)
    for _ in range(2):  # the next look resolves it; a later one does not open it again
        world.evaluator.step()
        world.clock.advance(5)
    assert world.incidents() == [(run_id, IncidentState.RESOLVED)]


def succeed_runs(world: World, job_id: str, count: int, seconds: int) -> None:  # noqa: F811
    for _ in range(count):
        submit(world, job_id)
        (assignment,) = world.start_queued()
        world.clock.advance(seconds)
        world.finish(assignment, AttemptState.SUCCEEDED)


def test_a_run_past_twice_its_jobs_p95_opens_an_incident_and_five_successes_are_needed(
    world: World,  # noqa: F811
) -> None:
    channel_id, _ = world.channel()
    judged, unjudged = job(world), job(world)
    succeed_runs(world, judged, 5, seconds=60)
    succeed_runs(world, unjudged, 4, seconds=60)
    world.rule(channel_id, RuleKind.RUNNING_LONG, factor=2.0, min_seconds=60)
    long_run = submit(world, judged)
    submit(world, unjudged)
    assignment = next(one for one in world.start_queued() if one.run_id == long_run)
    world.clock.advance(119)  # not yet over twice the p95 of 60 s
    world.evaluator.step()
    assert world.incidents() == []
    world.clock.advance(60)  # evaluated once a minute: now 179 s, 3.0x
    world.evaluator.step()
    assert world.incidents() == [(long_run, IncidentState.OPEN)]
    (summary,) = summaries(world)
    assert summary.endswith("running 3 min, 3.0x its p95 of 1 min")
    world.finish(assignment, AttemptState.SUCCEEDED)
    world.clock.advance(60)
    world.evaluator.step()
    assert world.incidents() == [(long_run, IncidentState.RESOLVED)]


def test_a_burst_of_misses_larger_than_a_page_is_judged_whole(
    world: World,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(late_runs, "PAGE", 2)
    reaper = Reaper(world.store, world.clock, heartbeat_timeout_seconds=3600)
    channel_id, _ = world.channel()
    job_id = job(world, deadline={"within_seconds": 5})
    world.rule(channel_id, RuleKind.DEADLINE_MISSED)
    first = [submit(world, job_id) for _ in range(3)]
    world.clock.advance(6)
    reaper.step()  # three marked at one instant
    world.evaluator.step()
    world.clock.advance(6)
    later = [submit(world, job_id) for _ in range(2)]
    world.clock.advance(6)
    reaper.step()
    for _ in range(2):
        world.evaluator.step()
        world.clock.advance(5)
    assert sorted(world.incidents()) == sorted((run_id, IncidentState.OPEN)
                                               for run_id in first + later)  # fmt: skip
