"""Alerts end to end below the API, on a store whose clock the test moves: runs fail through
the worker protocol, the evaluator opens incidents, the sender posts signed webhooks to a
real HTTP receiver on 127.0.0.1 — retrying with back-off while it fails — and recovery sends
a resolved notice. Loop passes are called directly; nothing sleeps."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update

from herder.app import reports
from herder.app.claims import claim
from herder.app.runs import cancel_run, resume_run, suspend_run
from herder.app.submit import submit
from herder.app.workflows import start as start_workflow_run
from herder.clock import epoch_ms
from herder.control import webhooks
from herder.control.alerts import AlertEvaluator, AlertSender
from herder.control.firer import Firer
from herder.domain.alerts.decisions import Signal
from herder.domain.alerts.rules import (
    ChannelRequest,
    DeliveryState,
    IncidentState,
    RuleChanges,
    RuleKind,
    RuleParams,
    RuleRequest,
)
from herder.domain.alerts.webhooks import MAX_ATTEMPTS, SIGNATURE_HEADER
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.models import Assignment
from herder.domain.overrides import RunOverrides
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import AttemptState
from herder.domain.workflows.spec import WorkflowSpec
from herder.protocol import Completion
from herder.store.alerts.incidents import open_incident
from herder.store.alerts.signals import OVERLAP, stored_rule
from herder.store.schedules import PARTITIONS
from herder.store.schema import alert_incidents, leases, runs
from herder.store.schema import runs as runs_table
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.conftest import TEST_KEYRING
from tests.integration.dispatching import dispatch
from tests.integration.webhook_receiver import Receiver, running_receiver
from tests.system.conftest import free_port


@dataclass
class World:
    store: Store
    clock: ManualClock
    tenant_id: str
    token_id: str
    receiver: Receiver
    evaluator: AlertEvaluator
    sender: AlertSender
    worker_id: str = ""

    def job(self) -> str:
        spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
        return self.store.jobs.create(self.tenant_id, f"j{random.random()}", spec).id

    def end_run(self, job_id: str, outcome: AttemptState) -> str:
        run, _ = submit(self.store, self.tenant_id, job_id, RunOverrides())
        self.end_queued(outcome)
        return run.id

    def end_queued(self, outcome: AttemptState) -> None:
        """The one queued run is placed, claimed and ends with ``outcome``."""
        (assignment,) = self.start_queued()
        self.finish(assignment, outcome)

    def start_queued(self) -> list[Assignment]:
        """The queued runs, placed and claimed."""
        dispatch(self.store)
        return claim(self.store, self.worker_id, 8)

    def finish(self, assignment: Assignment, outcome: AttemptState) -> None:
        exit_code = 0 if outcome is AttemptState.SUCCEEDED else 1
        completion = Completion(
            attempt_id=assignment.attempt_id, attempt=assignment.attempt, outcome=outcome,
            exit_code=exit_code, reason=f"exit {exit_code}",
        )  # fmt: skip
        (result,) = reports.report(self.store, self.worker_id, [], [completion])
        assert result.status == 200
        self.clock.advance(1)

    def channel(self) -> tuple[str, str]:
        created = self.store.alert_channels.create(
            self.tenant_id,
            ChannelRequest(name=f"hook{random.random()}", url=self.receiver.url + "/hook"),
            allow_private=True,
        )
        assert created.secret is not None
        return created.id, created.secret

    def rule(self, channel_id: str, kind: RuleKind, **params: object) -> str:
        request = RuleRequest(
            name=f"r{random.random()}", kind=kind,
            params=RuleParams.model_validate(params), channel_ids=[channel_id],
        )  # fmt: skip
        return self.store.alert_rules.create(self.tenant_id, request).id

    def incidents(self) -> list[tuple[str, IncidentState]]:
        page = self.store.alert_history.incidents(self.tenant_id)
        return [(incident.key, incident.state) for incident in page.items]


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    clock = ManualClock(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    store = Store(database_url, clock=clock, rng=random.Random(7), keyring=TEST_KEYRING)
    tenant = store.access.create_tenant("t")
    token_id = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
    sender = AlertSender(
        store.alert_deliveries, clock, messages=store.alert_messages, allow_private=True
    )
    worker_id = store.workers.register(
        token_id, name="w", capacity=Resources(cpu=8, memory_mb=8192),
        max_slots=8, labels={}, version="t",
    )[0].id  # fmt: skip
    with running_receiver() as receiver:
        yield World(store, clock, tenant.id, token_id, receiver, AlertEvaluator(store), sender,
                    worker_id)  # fmt: skip
    store.close()


def verified(received_body: bytes, header: str, secret: str) -> dict[str, object]:
    """The body, once its signature checks out (as a receiver would check it)."""
    parts = dict(part.split("=", 1) for part in header.split(","))
    signed = parts["t"].encode() + b"." + received_body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected)
    body: dict[str, object] = json.loads(received_body)
    return body


def test_consecutive_failures_open_one_incident_with_a_signed_webhook_and_recovery_resolves(
    world: World,
) -> None:
    channel_id, secret = world.channel()
    job_id = world.job()
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id, consecutive=2)

    world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    assert world.incidents() == []  # one failure of two
    failed = world.end_run(job_id, AttemptState.FAILED)
    for _ in range(3):  # evaluated again and again: still one incident
        world.evaluator.step()
        world.clock.advance(5)
    assert world.incidents() == [(job_id, IncidentState.OPEN)]

    world.sender.step()
    (opened,) = world.receiver.requests
    body = verified(opened.body, opened.headers[SIGNATURE_HEADER], secret)
    assert body["event"] == "opened"
    incident = body["incident"]
    assert isinstance(incident, dict)
    assert incident["key"] == job_id
    assert failed in incident["details"]["run_ids"]
    assert opened.headers["X-Herder-Delivery"] == body["delivery_id"]

    world.end_run(job_id, AttemptState.SUCCEEDED)
    world.evaluator.step()
    world.evaluator.step()
    assert world.incidents() == [(job_id, IncidentState.RESOLVED)]
    world.sender.step()
    second = world.receiver.requests[1]
    resolved = verified(second.body, second.headers[SIGNATURE_HEADER], secret)
    assert resolved["event"] == "resolved"
    assert len(world.receiver.requests) == 2

    world.end_run(job_id, AttemptState.FAILED)
    world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    assert [state for _, state in world.incidents()] == [IncidentState.OPEN, IncidentState.RESOLVED]


def test_a_failing_receiver_gets_retries_with_back_off_each_recorded(world: World) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.RUN_FAILED)
    world.end_run(world.job(), AttemptState.FAILED)
    world.evaluator.step()
    world.receiver.fail_first = 2

    world.sender.step()
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert len(world.receiver.requests) == 1, delivery  # what the sender recorded, if not
    assert world.sender.step() > 0  # not due again yet: nothing sent
    assert len(world.receiver.requests) == 1
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("pending", 1, 500)
    assert delivery.next_attempt_at is not None
    first_wait = (delivery.next_attempt_at - world.clock.now()).total_seconds()
    assert 2.5 <= first_wait <= 5.0

    world.clock.advance(first_wait)
    world.sender.step()  # fails again; the wait doubles
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.next_attempt_at is not None
    second_wait = (delivery.next_attempt_at - world.clock.now()).total_seconds()
    assert 5.0 <= second_wait <= 10.0

    world.clock.advance(second_wait)
    world.sender.step()
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert len(world.receiver.requests) == 3
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 3, 204)
    assert [attempt.status for attempt in delivery.history] == [500, 500, 204]
    assert delivery.next_attempt_at is None
    # the same delivery each time: the receiver can tell a retry from a new alert
    assert len({request.headers["X-Herder-Delivery"] for request in world.receiver.requests}) == 1


def test_a_receiver_that_never_recovers_fails_the_delivery_after_the_last_attempt(
    world: World,
) -> None:
    channel_id, _ = world.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    world.receiver.fail_first = MAX_ATTEMPTS + 5
    for _ in range(MAX_ATTEMPTS + 2):
        world.sender.step()
        world.clock.advance(3600)
    assert len(world.receiver.requests) == MAX_ATTEMPTS
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.state is DeliveryState.FAILED
    assert len(delivery.history) == MAX_ATTEMPTS


@pytest.mark.parametrize("mode", ["redirect", "huge"])
def test_redirects_are_not_followed_and_huge_answers_not_read(world: World, mode: str) -> None:
    channel_id, _ = world.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    world.receiver.mode = mode
    world.sender.step()
    assert len(world.receiver.requests) == 1  # a redirect's target was never asked
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    expected = (
        (DeliveryState.PENDING, 302) if mode == "redirect" else (DeliveryState.DELIVERED, 200)
    )
    assert (delivery.state, delivery.last_status) == expected


def test_a_hanging_receiver_is_cut_off(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhooks, "TOTAL_SECONDS", 0.3)
    channel_id, _ = world.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    world.receiver.mode = "hang"
    world.sender.step()
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.state is DeliveryState.PENDING
    assert delivery.last_error is not None
    assert "no answer within" in delivery.last_error


def test_a_receiver_not_listening_is_said_so(world: World) -> None:
    closed = world.store.alert_channels.create(
        world.tenant_id,
        ChannelRequest(name="closed", url=f"http://127.0.0.1:{free_port()}/hook"),
        allow_private=True,
    )
    world.store.alert_channels.send_test(world.tenant_id, closed.id)
    world.sender.step()
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.state is DeliveryState.PENDING
    assert delivery.last_error is not None
    assert delivery.last_error.startswith("could not connect to the receiver: ")
    assert "ConnectError" not in delivery.last_error


def test_private_targets_are_refused_unless_allowed(world: World) -> None:
    with pytest.raises(Invalid) as refused:
        world.store.alert_channels.create(
            world.tenant_id,
            ChannelRequest(name="loop", url="http://127.0.0.1:9/x"),
            allow_private=False,
        )
    assert refused.value.field == "url"
    channel_id, _ = world.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    strict = AlertSender(
        world.store.alert_deliveries, world.clock,
        messages=world.store.alert_messages, allow_private=False,
    )  # fmt: skip
    strict.step()  # the name resolves to loopback at send time: refused, nothing sent
    assert world.receiver.requests == []
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.last_error is not None
    assert "private address" in delivery.last_error


def test_a_name_rebound_to_loopback_after_its_check_never_reaches_loopback(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name answers an allowed address to the check, and loopback to
    anyone who asks after it. The POST goes to the checked address; the retry resolves
    again, sees loopback and is refused. The loopback service never hears of it."""
    loopback_service = world.receiver  # on 127.0.0.1
    port = int(loopback_service.url.rsplit(":", 1)[1])
    allowed = "127.0.0.2"  # stands for a public address: the check lets it through here
    monkeypatch.setattr(webhooks, "is_private_address", lambda address: address != allowed)
    system_getaddrinfo = socket.getaddrinfo

    def rebound_getaddrinfo(host: bytes | str | None, *args: Any, **kwargs: Any) -> Any:
        """What the name answers to everyone but the check: loopback."""
        return system_getaddrinfo("127.0.0.1" if host == "rebind.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebound_getaddrinfo)
    answers = iter([[allowed]])
    asked: list[tuple[str, int]] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return next(answers, ["127.0.0.1"])

    sender = AlertSender(
        world.store.alert_deliveries, world.clock, messages=world.store.alert_messages,
        allow_private=False, resolver=resolver,
    )  # fmt: skip
    created = world.store.alert_channels.create(
        world.tenant_id,
        ChannelRequest(name="rebind", url=f"http://rebind.test:{port}/hook"),
        allow_private=False,
    )
    with running_receiver(allowed, port) as checked_receiver:
        checked_receiver.fail_first = 1
        world.store.alert_channels.send_test(world.tenant_id, created.id)
        sender.step()
        (received,) = checked_receiver.requests
        assert received.path == "/hook"
        assert received.headers["Host"] == f"rebind.test:{port}"
        assert created.secret is not None
        verified(received.body, received.headers[SIGNATURE_HEADER], created.secret)
        world.clock.advance(10)  # past the first retry's back-off
        sender.step()
        assert len(checked_receiver.requests) == 1
    assert loopback_service.requests == []
    assert asked == [("rebind.test", port)] * 2  # each attempt resolved and checked afresh
    (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
    assert delivery.last_error == "refused: rebind.test resolves to the private address 127.0.0.1"
    assert [attempt.status for attempt in delivery.history] == [500, None]


def test_two_evaluators_open_one_incident(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    rule_id = world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    world.end_run(job_id, AttemptState.FAILED)
    with world.store.work() as work:
        rule = stored_rule(work, rule_id)
    assert rule is not None
    signal = Signal(job_id, True, "failed")
    for _ in range(2):  # both decided to open, from the same stale read
        with world.store.work() as work:
            open_incident(work, rule, signal)
    other = Store(world.store.database.url, clock=world.clock, keyring=TEST_KEYRING)
    try:
        evaluators = [world.evaluator, AlertEvaluator(other)]
        threads = [threading.Thread(target=one.step) for one in evaluators]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        other.close()
    assert world.incidents() == [(job_id, IncidentState.OPEN)]
    assert len(world.store.alert_history.deliveries(world.tenant_id).items) == 1


def test_a_workflow_or_schedule_rule_names_only_the_tenants_objects(world: World) -> None:
    channel_id, _ = world.channel()
    with pytest.raises(Invalid) as refused:
        world.rule(channel_id, RuleKind.WORKFLOW_FAILED, workflow_id="wf_nothere")
    assert [error.field for error in refused.value.errors] == ["params.workflow_id"]
    with pytest.raises(Invalid) as refused:
        world.rule(channel_id, RuleKind.LOOP_STALE)
    assert [error.field for error in refused.value.errors] == ["kind"]


def test_no_capacity_opens_after_runs_wait_and_resolves_when_they_are_placed(
    world: World,
) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.NO_CAPACITY, wait_seconds=300)
    spec = JobSpec.model_validate(
        {"runtime": "shell", "command": "true", "resources": {"cpu": 64, "memory_mb": 64}}
    )
    job_id = world.store.jobs.create(world.tenant_id, "big", spec).id
    run, _ = submit(world.store, world.tenant_id, job_id, RunOverrides())
    dispatch(world.store)  # no worker is big enough: the run waits with a reason
    world.clock.advance(301)
    world.evaluator.step()
    assert world.incidents() == [("queue", IncidentState.OPEN)]
    cancel_run(world.store, world.tenant_id, run.id, actor="test")
    world.evaluator.step()
    assert world.incidents() == [("queue", IncidentState.RESOLVED)]


def test_a_suspended_run_waits_for_no_capacity_and_its_wait_starts_again_at_its_resume(
    world: World,
) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.NO_CAPACITY, wait_seconds=300)
    spec = JobSpec.model_validate(
        {"runtime": "shell", "command": "true", "resources": {"cpu": 64, "memory_mb": 64}}
    )
    job_id = world.store.jobs.create(world.tenant_id, "big", spec).id
    run, _ = submit(world.store, world.tenant_id, job_id, RunOverrides())
    dispatch(world.store)
    world.clock.advance(301)
    world.evaluator.step()
    assert world.incidents() == [("queue", IncidentState.OPEN)]
    suspend_run(world.store, world.tenant_id, run.id, actor="test")
    world.evaluator.step()
    assert world.incidents() == [("queue", IncidentState.RESOLVED)]
    world.clock.advance(3600)
    resume_run(world.store, world.tenant_id, run.id, actor="test")
    dispatch(world.store)
    world.clock.advance(60)
    world.evaluator.step()  # waiting a minute since its resume, not an hour and more
    assert world.incidents() == [("queue", IncidentState.RESOLVED)]


def test_missed_fires_open_an_incident_that_an_on_time_fire_resolves(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    first = world.clock.now() + timedelta(minutes=1)
    schedule = world.store.schedules.create(
        world.tenant_id, job_id, ScheduleSpec(cron="* * * * *"), first
    )
    world.rule(channel_id, RuleKind.SCHEDULE_MISSED, schedule_id=schedule.id)
    firers = [Firer(world.store, world.clock, partition) for partition in range(PARTITIONS)]
    world.clock.advance(10 * 60)  # no scheduler ran for ten minutes
    for firer in firers:
        firer.step()  # records the misses, fires one catch-up run
    world.evaluator.step()
    world.evaluator.step()  # the catch-up fire does not count as on time
    assert world.incidents() == [(schedule.id, IncidentState.OPEN)]
    world.clock.advance(60)
    for firer in firers:
        firer.step()  # on time
    world.evaluator.step()
    assert world.incidents() == [(schedule.id, IncidentState.RESOLVED)]
    world.clock.advance(5)
    world.evaluator.step()  # the misses, read again in the overlap, are judged already
    assert world.incidents() == [(schedule.id, IncidentState.RESOLVED)]


def test_queue_wait_p99_opens_when_runs_waited_too_long(world: World) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.QUEUE_WAIT_P99, threshold_seconds=30)
    world.evaluator.step()
    assert world.incidents() == []  # nothing started: nothing to judge
    job_id = world.job()
    submit(world.store, world.tenant_id, job_id, RunOverrides())
    world.clock.advance(120)  # queued two minutes before it is placed
    dispatch(world.store)
    world.evaluator.step()
    (incident,) = world.store.alert_history.incidents(world.tenant_id).items
    assert incident.key == "queue"
    assert incident.details["p99_seconds"] == 120.0


def test_a_preempted_runs_wait_counts_from_its_preemption_not_its_first_queueing(
    world: World,
) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.QUEUE_WAIT_P99, threshold_seconds=60)
    world.rule(channel_id, RuleKind.NO_CAPACITY, wait_seconds=300)
    run, _ = submit(world.store, world.tenant_id, world.job(), RunOverrides())
    world.clock.advance(8 * 3600)  # it ran for hours, then was preempted ten seconds ago
    with world.store.database.write() as connection:
        connection.execute(
            update(runs_table)
            .where(runs_table.c.id == run.id)
            .values(preempted_at=world.clock.now() - timedelta(seconds=10))
        )
    world.evaluator.step()  # waiting ten seconds, not eight hours: no capacity alert
    world.start_queued()
    world.evaluator.step()
    assert world.incidents() == []


def test_a_stale_loop_alerts_the_system_tenant(world: World) -> None:
    system = world.store.access.create_tenant("sys", is_system=True)
    world.tenant_id = system.id
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.LOOP_STALE, stale_seconds=30)
    with world.store.database.write() as connection:
        connection.execute(
            insert(leases).values(
                name="reaper", holder="h", fencing=1, expires_at=world.clock.now()
            )
        )
    world.evaluator.step()
    assert world.incidents() == []
    world.clock.advance(31)
    world.evaluator.step()
    assert world.incidents() == [("reaper", IncidentState.OPEN)]


def test_every_kind_evaluates_on_a_quiet_tenant(world: World) -> None:
    channel_id, _ = world.channel()
    for kind in RuleKind:
        if kind is not RuleKind.LOOP_STALE:
            params = {"threshold_seconds": 5} if kind is RuleKind.QUEUE_WAIT_P99 else {}
            world.rule(channel_id, kind, **params)
    world.clock.advance(600)
    world.evaluator.step()
    world.evaluator.step()
    assert world.incidents() == []


def test_a_failed_workflow_run_opens_an_incident_and_a_success_resolves_it(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    job_name = world.store.jobs.get(world.tenant_id, job_id).name
    spec = WorkflowSpec.model_validate({"tasks": [{"name": "a", "job": job_name}]})
    workflow = world.store.workflows.create(world.tenant_id, "flow", spec)
    world.rule(channel_id, RuleKind.WORKFLOW_FAILED, workflow_id=workflow.id)
    start_workflow_run(world.store, world.tenant_id, workflow.id, {})
    world.end_queued(AttemptState.FAILED)
    world.evaluator.step()
    assert world.incidents() == [(workflow.id, IncidentState.OPEN)]
    start_workflow_run(world.store, world.tenant_id, workflow.id, {})
    world.end_queued(AttemptState.SUCCEEDED)
    world.evaluator.step()
    assert world.incidents() == [(workflow.id, IncidentState.RESOLVED)]


def test_a_run_that_fails_days_after_it_was_made_is_alerted_on(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    submit(world.store, world.tenant_id, job_id, RunOverrides())
    (assignment,) = world.start_queued()
    world.clock.advance(5 * 86_400)  # a long run, made five days before it ends
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    world.finish(assignment, AttemptState.FAILED)
    world.evaluator.step()
    assert world.incidents() == [(job_id, IncidentState.OPEN)]


def test_the_last_end_is_the_run_that_ended_last_not_the_one_made_last(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    for _ in range(2):
        submit(world.store, world.tenant_id, job_id, RunOverrides())
    first, second = sorted(world.start_queued(), key=lambda one: one.run_id)
    world.finish(second, AttemptState.FAILED)
    world.finish(first, AttemptState.SUCCEEDED)  # made first, ended last: the job is well
    world.evaluator.step()
    assert world.incidents() == []
    submit(world.store, world.tenant_id, job_id, RunOverrides())
    world.end_queued(AttemptState.FAILED)
    world.evaluator.step()
    assert world.incidents() == [(job_id, IncidentState.OPEN)]


def test_every_failing_job_is_alerted_on_however_many_fail_at_once(world: World) -> None:
    channel_id, _ = world.channel()
    world.rule(channel_id, RuleKind.RUN_FAILED)
    now = world.clock.now()
    failed = [
        {"id": new_id("run", epoch_ms(now)), "tenant_id": world.tenant_id,
         "job_id": f"job_{number:04}", "job_name": f"j{number}", "state": "failed",
         "priority": 0, "spec": {}, "cpu_milli": 1000, "memory_mb": 1, "gpus": 0,
         "created_at": now, "finished_at": now}
        for number in range(501)  # one more than a pass once read
    ]  # fmt: skip
    with world.store.database.write() as connection:
        connection.execute(insert(runs), failed)
    world.clock.advance(1)
    world.evaluator.step()
    with world.store.database.read() as connection:
        opened = connection.execute(
            select(func.count()).where(alert_incidents.c.state == IncidentState.OPEN)
        ).scalar()
    assert opened == 501


def test_an_open_incident_follows_the_latest_failures(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    first = world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    later = world.end_run(job_id, AttemptState.TIMED_OUT)
    world.evaluator.step()
    (incident,) = world.store.alert_history.incidents(world.tenant_id).items
    assert incident.details == {"run_ids": [later], "state": "timed_out"}
    assert later in incident.summary
    assert first != later
    assert len(world.store.alert_history.deliveries(world.tenant_id).items) == 1  # no new page


@pytest.mark.parametrize("how", ["disabled", "deleted"])
def test_a_rule_turned_off_resolves_its_open_incidents_without_a_notice(
    world: World, how: str
) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    rule_id = world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    if how == "disabled":
        world.store.alert_rules.update(world.tenant_id, rule_id, RuleChanges(enabled=False))
    else:
        world.store.alert_rules.delete(world.tenant_id, rule_id)
    (incident,) = world.store.alert_history.incidents(world.tenant_id).items
    assert (incident.state, incident.resolution) == (IncidentState.RESOLVED, f"rule {how}")
    assert incident.resolved_at == world.clock.now()
    deliveries = world.store.alert_history.deliveries(world.tenant_id).items
    assert [delivery.event for delivery in deliveries] == ["opened"]  # no resolved notice
    world.evaluator.step()
    assert world.incidents() == [(job_id, IncidentState.RESOLVED)]
    if how == "disabled":  # enabled again, it looks forward: the old failure is not news
        world.clock.advance(OVERLAP.total_seconds() + 60)
        world.store.alert_rules.update(world.tenant_id, rule_id, RuleChanges(enabled=True))
        world.evaluator.step()
        assert world.incidents() == [(job_id, IncidentState.RESOLVED)]


def test_queue_wait_p99_counts_a_run_queued_for_hours_before_the_window(world: World) -> None:
    channel_id, _ = world.channel()
    job_id = world.job()
    submit(world.store, world.tenant_id, job_id, RunOverrides())
    world.rule(channel_id, RuleKind.QUEUE_WAIT_P99, threshold_seconds=60)
    world.clock.advance(8 * 3600)
    (assignment,) = world.start_queued()
    world.evaluator.step()  # running: counted
    (incident,) = world.store.alert_history.incidents(world.tenant_id).items
    assert incident.details["p99_seconds"] == 8 * 3600
    world.finish(assignment, AttemptState.SUCCEEDED)
    world.clock.advance(60)
    world.evaluator.step()  # ended in the window: still counted, still open
    assert world.incidents() == [("queue", IncidentState.OPEN)]
