"""Email channels end to end below the API, on a store whose clock the test moves: a failed
run's incident reaches a real SMTP relay (aiosmtpd, STARTTLS with a certificate the test
made, AUTH) as an email that says what happened and links back to the run; a burst of 500
is one email; a channel sends at most five a minute and the rest go in the next one; a
relay that refuses, is down or hangs is retried with back-off, each attempt in the log."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from herder.clock import epoch_ms
from herder.control import smtp
from herder.control.alerts import AlertEvaluator, AlertSender
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.outbound import Outbound, SmtpRelay
from herder.domain.alerts.rules import ChannelRequest, Delivery, DeliveryState, RuleKind
from herder.domain.ids import new_id
from herder.domain.jobs import Resources
from herder.domain.listings import PageRequest
from herder.domain.states import AttemptState
from herder.store.schema import runs
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.conftest import TEST_KEYRING
from tests.integration.smtp_relay import PASSWORD, USER, Relay, running_relay
from tests.integration.test_alert_deliveries import World
from tests.integration.test_webhook_pinning import certificate_for
from tests.integration.webhook_receiver import running_receiver
from tests.system.conftest import free_port

DASHBOARD = "https://herder.example.com/"
RECIPIENTS = "mailto:ops@example.com,oncall@example.com"


class Mail:
    """A world of alerts whose sender hands email to the relay at ``port``."""

    def __init__(self, world: World, ca_file: Path, port: int) -> None:
        self.world = world
        self.ca_file = ca_file
        self.port = port

    def sender(self, password: str = PASSWORD, port: int | None = None) -> AlertSender:
        relay = SmtpRelay(
            host="localhost", port=port or self.port, sender="herder@example.com",
            username=USER, password=password,
        )  # fmt: skip
        outbound = Outbound(relay=relay, dashboard_url=DASHBOARD, ca_file=self.ca_file)
        store = self.world.store
        return AlertSender(
            store.alert_deliveries, self.world.clock, messages=store.alert_messages,
            allow_private=True, outbound=outbound,
        )  # fmt: skip

    def channel(self) -> str:
        request = ChannelRequest(name="ops-mail", kind=ChannelKind.EMAIL, url=RECIPIENTS)
        return self.world.store.alert_channels.create(
            self.world.tenant_id, request, allow_private=False
        ).id

    def deliveries(self) -> list[Delivery]:
        history = self.world.store.alert_history
        return list(history.deliveries(self.world.tenant_id, page=PageRequest(limit=1000)).items)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return certificate_for("localhost", tmp_path)


@pytest.fixture
def relay(certificate: tuple[Path, Path]) -> Iterator[Relay]:
    with running_relay(*certificate) as relay:
        yield relay


@contextmanager
def alerts_world(database_url: str) -> Iterator[World]:
    """A tenant, a worker to fail runs on, the evaluator, and a sender with no relay."""
    clock = ManualClock(datetime(2026, 12, 7, 12, 0, tzinfo=UTC))
    store = Store(database_url, clock=clock, rng=random.Random(7), keyring=TEST_KEYRING)
    tenant = store.access.create_tenant("t")
    token_id = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
    worker_id = store.workers.register(
        token_id, name="w", capacity=Resources(cpu=8, memory_mb=8192),
        max_slots=8, labels={}, version="t",
    )[0].id  # fmt: skip
    sender = AlertSender(
        store.alert_deliveries, clock, messages=store.alert_messages, allow_private=True
    )
    try:
        with running_receiver() as unused:  # the webhook receiver World has: none is made here
            yield World(store, clock, tenant.id, token_id, unused, AlertEvaluator(store),
                        sender, worker_id)  # fmt: skip
    finally:
        store.close()


@pytest.fixture
def mail(database_url: str, certificate: tuple[Path, Path], relay: Relay) -> Iterator[Mail]:
    with alerts_world(database_url) as world:
        yield Mail(world, certificate[0], relay.port)


def test_a_failed_run_reaches_people_by_email_with_a_link_to_it(mail: Mail, relay: Relay) -> None:
    world = mail.world
    channel_id = mail.channel()
    job_id = world.job()
    world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
    run_id = world.end_run(job_id, AttemptState.FAILED)
    world.evaluator.step()
    mail.sender().step()

    (received,) = relay.received
    assert relay.logins == [USER]  # after STARTTLS: the relay offers AUTH on TLS alone
    assert received.sender == "herder@example.com"
    assert received.recipients == ["ops@example.com", "oncall@example.com"]
    email = received.email
    assert email["Subject"].startswith("[herder] opened: job ")
    assert f"failed ({run_id} failed)" in email["Subject"]
    assert email["To"] == "ops@example.com, oncall@example.com"
    text = email.get_body(("plain",))
    html = email.get_body(("html",))
    assert text is not None
    assert html is not None
    assert f"Open the run: {DASHBOARD}#/runs/{run_id}" in text.get_content()
    assert f'href="{DASHBOARD}#/runs/{run_id}"' in html.get_content()
    (delivery,) = mail.deliveries()
    assert delivery.state == DeliveryState.DELIVERED
    (attempt,) = delivery.history
    assert (attempt.status, attempt.error, attempt.message_deliveries) == (250, None, 1)
    assert email["Message-ID"] == f"<{attempt.message_id}@example.com>"


def test_a_burst_of_500_failures_is_one_email_that_counts_them(mail: Mail, relay: Relay) -> None:
    world = mail.world
    channel_id = mail.channel()
    world.rule(channel_id, RuleKind.RUN_FAILED)  # every job: one incident each
    now = world.clock.now()
    failed = [
        {"id": new_id("run", epoch_ms(now)), "tenant_id": world.tenant_id,
         "job_id": f"job_{number:04}", "job_name": f"j{number}", "state": "failed",
         "priority": 0, "spec": {}, "cpu_milli": 1000, "memory_mb": 1, "gpus": 0,
         "created_at": now, "finished_at": now}
        for number in range(500)
    ]  # fmt: skip
    with world.store.database.write() as connection:
        connection.execute(insert(runs), failed)
    world.clock.advance(1)
    world.evaluator.step()
    mail.sender().step()

    (received,) = relay.received
    assert received.email["Subject"] == "[herder] 500 alerts (500 opened)"
    text = received.email.get_body(("plain",))
    assert text is not None
    assert text.get_content().count("* opened: job ") == 5
    assert "… and 495 more." in text.get_content()
    assert f"Every alert: {DASHBOARD}#/alerts" in text.get_content()
    deliveries = mail.deliveries()
    assert len(deliveries) == 500  # the log still shows each
    assert {one.state for one in deliveries} == {DeliveryState.DELIVERED}
    assert {
        (one.history[0].message_id, one.history[0].message_deliveries) for one in deliveries
    } == {(deliveries[0].history[0].message_id, 500)}


def test_a_channel_sends_five_emails_a_minute_and_the_rest_in_the_next(
    mail: Mail, relay: Relay
) -> None:
    world = mail.world
    channel_id = mail.channel()
    sender = mail.sender()
    for _ in range(5):
        world.store.alert_channels.send_test(world.tenant_id, channel_id)
        sender.step()
        world.clock.advance(1)
    assert len(relay.received) == 5
    for _ in range(3):  # within the same minute: held, no attempt counted
        world.store.alert_channels.send_test(world.tenant_id, channel_id)
        sender.step()
    assert len(relay.received) == 5
    held = [one for one in mail.deliveries() if one.state == DeliveryState.PENDING]
    assert [(one.attempts, one.history) for one in held] == [(0, [])] * 3
    world.clock.advance(55)  # the first email left the window
    sender.step()
    assert len(relay.received) == 6
    assert relay.received[-1].email["Subject"] == "[herder] 3 alerts (3 test)"
    after = {one.id: one for one in mail.deliveries()}
    assert {after[one.id].history[0].message_deliveries for one in held} == {3}
    assert {one.state for one in after.values()} == {DeliveryState.DELIVERED}


def test_a_relay_that_refuses_the_login_is_retried_and_logged(mail: Mail, relay: Relay) -> None:
    world = mail.world
    channel_id = mail.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    mail.sender(password="wrong").step()
    assert relay.received == []
    (delivery,) = mail.deliveries()
    assert delivery.state == DeliveryState.PENDING
    assert delivery.last_error is not None
    assert delivery.last_error.startswith("the relay answered 535")
    assert delivery.last_status == 535
    assert delivery.next_attempt_at is not None
    wait = (delivery.next_attempt_at - world.clock.now()).total_seconds()
    assert 2.5 <= wait <= 5  # the webhooks' back-off
    world.clock.advance(wait)
    mail.sender().step()
    assert len(relay.received) == 1
    (delivered,) = mail.deliveries()
    assert delivered.state == DeliveryState.DELIVERED
    assert [attempt.status for attempt in delivered.history] == [535, 250]


def test_a_relay_that_is_down_or_hangs_is_a_failed_attempt_saying_so(
    mail: Mail, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = mail.world
    channel_id = mail.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    mail.sender(port=free_port()).step()  # nothing listens there
    (delivery,) = mail.deliveries()
    assert delivery.last_error is not None
    assert delivery.last_error.startswith("could not reach the relay localhost:")

    monkeypatch.setattr(smtp, "TOTAL_SECONDS", 0.5)
    with socket.socket() as silent:  # takes the connection, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        world.clock.advance(600)
        mail.sender(port=silent.getsockname()[1]).step()
    (delivery,) = mail.deliveries()
    assert delivery.attempts == 2
    assert delivery.last_error is not None
    assert "localhost:" in delivery.last_error
    assert "did not answer in time" in delivery.last_error or "took over" in delivery.last_error


def test_without_a_relay_an_email_fails_saying_what_to_set(mail: Mail) -> None:
    world = mail.world
    channel_id = mail.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    world.sender.step()  # a sender with no relay configured
    (delivery,) = mail.deliveries()
    assert delivery.state == DeliveryState.PENDING
    assert delivery.last_error is not None
    assert "HERDER_SMTP_URL" in delivery.last_error


def test_plain_text_is_refused_unless_the_operator_allowed_it(mail: Mail) -> None:
    """A relay without STARTTLS (a bare socket answering as one): nothing is sent."""
    world = mail.world
    channel_id = mail.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        thread = threading.Thread(target=_plain_relay, args=(server,), daemon=True)
        thread.start()
        mail.sender(port=server.getsockname()[1]).step()
        thread.join(10)
    (delivery,) = mail.deliveries()
    assert delivery.last_error is not None
    assert "does not offer STARTTLS" in delivery.last_error


def _plain_relay(server: socket.socket) -> None:
    """Greets and answers EHLO without STARTTLS, then waits for the client to leave."""
    connection, _ = server.accept()
    with connection, connection.makefile("rb") as reader:
        connection.sendall(b"220 plain.example.com ESMTP\r\n")
        for line in reader:
            if line.upper().startswith((b"EHLO", b"HELO")):
                connection.sendall(b"250-plain.example.com\r\n250 AUTH PLAIN\r\n")
            elif line.upper().startswith(b"QUIT"):
                connection.sendall(b"221 bye\r\n")
                return
            else:
                connection.sendall(b"502 no\r\n")
