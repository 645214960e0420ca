"""A job's notices delivered, below the API on a store whose clock the test moves: a
subscriber's failed run reaches a real SMTP relay (aiosmtpd, STARTTLS, AUTH) through the
alert machinery; a run stopped at the 24-hour limit tells its job's creator with no rule —
once, never a person of another tenant, and not when the job's subscribers of time-outs
are told by their own rule; a shorter time-out tells no one."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from herder.app.notices import subscribe
from herder.app.submit import submit
from herder.domain.alerts.notices import NoticeEvent, NoticeRequest
from herder.domain.jobs import MAX_TIMEOUT_SECONDS, JobSpec
from herder.domain.models import Principal, Role
from herder.domain.overrides import RunOverrides
from herder.domain.sign_in import Person
from herder.domain.states import AttemptState
from herder.store.alerts import limit_notices as limit_notices_store
from herder.store.schema import limit_notices
from tests.integration.smtp_relay import Relay, running_relay
from tests.integration.test_alert_deliveries import World
from tests.integration.test_alert_email import Mail, alerts_world
from tests.integration.test_webhook_pinning import certificate_for


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return certificate_for("localhost", tmp_path)


@pytest.fixture
def relay(certificate: tuple[Path, Path]) -> Iterator[Relay]:
    with running_relay(*certificate) as relay:
        yield relay


@pytest.fixture
def mail(database_url: str, certificate: tuple[Path, Path], relay: Relay) -> Iterator[Mail]:
    with alerts_world(database_url) as world:
        yield Mail(world, certificate[0], relay.port)


def caller(world: World, key_id: str = "key_01TEST") -> Principal:
    return Principal(tenant_id=world.tenant_id, role=Role.OPERATOR, key_id=key_id,
                     is_system=False)  # fmt: skip


def person(world: World, tenant_id: str, email: str) -> str:
    """A signed-in person of ``tenant_id``: their actor."""
    who = Person(issuer="https://id.example.com", subject=email, name=email, email=email)
    session, _ = world.store.users.sign_in(
        who, tenant_id, Role.DEVELOPER, kind="cli", lifetime=timedelta(hours=1)
    )
    return f"user:{session.user_id}"


def long_job(
    world: World, created_by: str | None, timeout: int = MAX_TIMEOUT_SECONDS, tries: int = 1
) -> str:
    spec = JobSpec.model_validate(
        {"runtime": "shell", "command": "sleep infinity", "timeout_seconds": timeout,
         "retry": {"max_attempts": tries}}
    )  # fmt: skip
    name = f"long{random.random()}"
    return world.store.jobs.create(world.tenant_id, name, spec, created_by=created_by).id


def time_out(world: World, job_id: str, seconds: int = MAX_TIMEOUT_SECONDS) -> str:
    """A run of the job, started, stopped by its worker at its timeout."""
    run, _ = submit(world.store, world.tenant_id, job_id, RunOverrides())
    (assignment,) = world.start_queued()
    world.clock.advance(seconds)
    world.finish(assignment, AttemptState.TIMED_OUT)
    return run.id


def test_a_subscribers_failed_run_reaches_them_by_email(mail: Mail, relay: Relay) -> None:
    world = mail.world
    job_id = world.job()
    request = NoticeRequest(on=[NoticeEvent.FAILED], to="mailto:me@example.com")
    subscribe(world.store, caller(world), job_id, request, allow_private=True)
    world.end_run(job_id, AttemptState.SUCCEEDED)
    run_id = world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    mail.sender().step()
    (received,) = relay.received
    assert received.recipients == ["me@example.com"]
    assert f"failed ({run_id} failed)" in received.email["Subject"]
    text = received.email.get_body(("plain",))
    assert text is not None
    assert f"#/runs/{run_id}" in text.get_content()
    # a second failure is the same episode: no second email
    world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    mail.sender().step()
    assert len(relay.received) == 1


def test_a_run_stopped_at_the_24_hour_limit_tells_its_creator_once(
    mail: Mail, relay: Relay
) -> None:
    world = mail.world
    creator = person(world, world.tenant_id, "ada@example.com")
    job_id = long_job(world, creator)
    run_id = time_out(world, job_id)
    world.evaluator.step()
    mail.sender().step()
    (received,) = relay.received
    assert received.recipients == ["ada@example.com"]
    assert "stopped at the 24-hour limit" in received.email["Subject"]
    text = received.email.get_body(("plain",))
    assert text is not None
    assert f"#/runs/{run_id}" in text.get_content()
    # told once, however many passes look again
    for _ in range(3):
        world.clock.advance(61)
        world.evaluator.step()
        mail.sender().step()
    assert len(relay.received) == 1
    channels = world.store.alert_channels.list(world.tenant_id).items
    assert [(one.managed_by, one.url) for one in channels] == [("owner", "mailto:ada@example.com")]


def test_the_24_hour_notice_tells_no_one_outside_the_tenant_nor_for_a_shorter_timeout(
    mail: Mail, relay: Relay
) -> None:
    world = mail.world
    elsewhere = world.store.access.create_tenant("elsewhere")
    stranger = person(world, elsewhere.id, "eve@example.com")
    creator = person(world, world.tenant_id, "ada@example.com")
    for job_id, seconds in [
        (long_job(world, stranger), MAX_TIMEOUT_SECONDS),
        (long_job(world, "user:key_01ANYKEY"), MAX_TIMEOUT_SECONDS),  # a key has no email
        (long_job(world, creator, timeout=3600), 3600),
    ]:
        time_out(world, job_id, seconds)
        world.clock.advance(61)
        world.evaluator.step()
        mail.sender().step()
    assert relay.received == []
    with world.store.database.read() as connection:
        told = sorted(row.told for row in connection.execute(limit_notices.select()))
    assert told == ["nobody", "nobody"]


def test_subscribers_of_time_outs_are_told_by_their_rule_instead(mail: Mail, relay: Relay) -> None:
    world = mail.world
    creator = person(world, world.tenant_id, "ada@example.com")
    job_id = long_job(world, creator)
    request = NoticeRequest(on=[NoticeEvent.TIMED_OUT], to="mailto:oncall@example.com")
    subscribe(world.store, caller(world), job_id, request, allow_private=True)
    run_id = time_out(world, job_id)
    world.evaluator.step()
    mail.sender().step()
    (received,) = relay.received
    assert received.recipients == ["oncall@example.com"]
    assert f"({run_id} timed_out)" in received.email["Subject"]


def test_a_run_that_retries_after_the_limit_tells_its_creator_though_subscribers_exist(
    mail: Mail, relay: Relay
) -> None:
    """Their rule tells of runs that ended timed out: one that retries (and may end dead)
    is not one, so the creator is told as though there were none."""
    world = mail.world
    creator = person(world, world.tenant_id, "ada@example.com")
    job_id = long_job(world, creator, tries=2)
    request = NoticeRequest(on=[NoticeEvent.TIMED_OUT], to="mailto:oncall@example.com")
    subscribe(world.store, caller(world), job_id, request, allow_private=True)
    run_id = time_out(world, job_id)
    assert world.store.runs.get(world.tenant_id, run_id).state == "retry_wait"
    world.evaluator.step()
    mail.sender().step()
    (received,) = relay.received
    assert received.recipients == ["ada@example.com"]
    assert "stopped at the 24-hour limit" in received.email["Subject"]


def test_shorter_time_outs_read_first_hold_no_24_hour_notice_back(
    mail: Mail, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass reads a bounded number of time-outs, oldest first: those that tell no one
    (a shorter timeout) are not among them."""
    monkeypatch.setattr(limit_notices_store, "MAX_TIMED_OUT_READ", 1)
    world = mail.world
    creator = person(world, world.tenant_id, "ada@example.com")
    long_id, short_id = long_job(world, creator), long_job(world, creator, timeout=60)
    submit(world.store, world.tenant_id, long_id, RunOverrides())
    (long_run,) = world.start_queued()
    world.clock.advance(MAX_TIMEOUT_SECONDS - 120)
    submit(world.store, world.tenant_id, short_id, RunOverrides())
    (short_run,) = world.start_queued()
    world.clock.advance(60)
    world.finish(short_run, AttemptState.TIMED_OUT)  # its reaper's deadline is the earlier
    world.clock.advance(59)
    world.finish(long_run, AttemptState.TIMED_OUT)
    world.evaluator.step()
    mail.sender().step()
    (received,) = relay.received
    assert received.recipients == ["ada@example.com"]
    assert "stopped at the 24-hour limit" in received.email["Subject"]
