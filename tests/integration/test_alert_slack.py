"""Slack channels end to end: a failed run's incident reaches a real HTTPS server standing
for ``hooks.slack.com`` (a certificate the test made, the name resolved to it by the test) as
Slack's incoming-webhook JSON with blocks and a button back to the run; the URL, which is the
channel's credential, is kept sealed and shown masked; a refusal is retried with Slack's own
words in the log; the webhooks' address rules hold at every attempt."""

from __future__ import annotations

import json
from pathlib import Path

from herder.control.alerts import AlertSender
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.outbound import Outbound
from herder.domain.alerts.rules import ChannelRequest, DeliveryState, RuleKind
from herder.domain.states import AttemptState
from herder.store.schema import alert_channels
from tests.integration.test_alert_deliveries import World
from tests.integration.test_alert_email import DASHBOARD, alerts_world
from tests.integration.test_webhook_pinning import certificate_for, serving
from tests.integration.webhook_receiver import Receiver, running_receiver

TOKEN = "xoxbTOKENabc123"


async def to_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def slack_sender(world: World, certificate: Path, *, allow_private: bool = True) -> AlertSender:
    outbound = Outbound(dashboard_url=DASHBOARD, ca_file=certificate)
    return AlertSender(
        world.store.alert_deliveries, world.clock, messages=world.store.alert_messages,
        allow_private=allow_private, outbound=outbound, resolver=to_loopback,
    )  # fmt: skip


def slack_channel(world: World, slack: Receiver) -> str:
    port = slack.url.rsplit(":", 1)[1]
    url = f"https://hooks.slack.com:{port}/services/T0001/B0002/{TOKEN}"
    request = ChannelRequest(name="team", kind=ChannelKind.SLACK, url=url)
    created = world.store.alert_channels.create(world.tenant_id, request, allow_private=False)
    assert created.secret is None
    assert created.url == f"https://hooks.slack.com:{port}/services/T0001/B0002/…"
    return created.id


def test_a_failed_run_reaches_slack_as_blocks_with_a_button_to_it(
    database_url: str, tmp_path: Path
) -> None:
    certificate, key = certificate_for("hooks.slack.com", tmp_path)
    with alerts_world(database_url) as world, running_receiver(
        tls=serving(certificate, key)
    ) as slack:  # fmt: skip
        channel_id = slack_channel(world, slack)
        job_id = world.job()
        world.rule(channel_id, RuleKind.RUN_FAILED, job_id=job_id)
        run_id = world.end_run(job_id, AttemptState.FAILED)
        world.evaluator.step()
        slack_sender(world, certificate).step()

        (request,) = slack.requests
        assert request.path == f"/services/T0001/B0002/{TOKEN}"
        assert slack.server_names == ["hooks.slack.com"]
        assert request.headers["Content-Type"] == "application/json"
        assert "X-Herder-Signature" not in request.headers
        body = json.loads(request.body)
        assert body["text"].startswith("[herder] opened: job ")
        header, section, actions = body["blocks"]
        assert header["type"] == "header"
        assert header["text"]["type"] == "plain_text"
        assert section["text"]["text"].startswith("*opened*: job ")
        facts = [field["text"] for field in section["fields"]]
        assert f"*About*\n{job_id}" in facts
        (button,) = actions["elements"]
        assert button["url"] == f"{DASHBOARD}#/runs/{run_id}"
        assert button["text"]["text"] == "Open the run"
        (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
        assert delivery.state == DeliveryState.DELIVERED


def test_the_slack_url_is_sealed_at_rest_and_never_shown(database_url: str) -> None:
    with alerts_world(database_url) as world, running_receiver() as slack:
        channel_id = slack_channel(world, slack)
        with world.store.database.read() as connection:
            row = connection.execute(
                alert_channels.select().where(alert_channels.c.id == channel_id)
            ).one()
        assert TOKEN not in repr(tuple(row))
        assert row.ciphertext is not None
        listed = world.store.alert_channels.list(world.tenant_id).items
        assert TOKEN not in json.dumps([one.model_dump(mode="json") for one in listed])


def test_a_refusal_is_retried_with_slacks_words_in_the_log(
    database_url: str, tmp_path: Path
) -> None:
    certificate, key = certificate_for("hooks.slack.com", tmp_path)
    with alerts_world(database_url) as world, running_receiver(
        tls=serving(certificate, key)
    ) as slack:  # fmt: skip
        slack.fail_first = 1  # answers 500 "down"
        channel_id = slack_channel(world, slack)
        world.store.alert_channels.send_test(world.tenant_id, channel_id)
        sender = slack_sender(world, certificate)
        sender.step()
        (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
        assert delivery.state == DeliveryState.PENDING
        assert (delivery.last_status, delivery.last_error) == (500, "Slack answered 500: down")
        world.clock.advance(10)
        sender.step()
        (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
        assert delivery.state == DeliveryState.DELIVERED
        assert [attempt.status for attempt in delivery.history] == [500, 204]
        assert json.loads(slack.requests[-1].body)["blocks"][1]["text"]["text"] == (
            "*test*: a test of alert channel team"
        )


def test_a_slack_name_that_resolves_to_a_private_address_is_not_posted_to(
    database_url: str, tmp_path: Path
) -> None:
    certificate, _ = certificate_for("hooks.slack.com", tmp_path)
    with alerts_world(database_url) as world, running_receiver() as slack:
        channel_id = slack_channel(world, slack)
        world.store.alert_channels.send_test(world.tenant_id, channel_id)
        slack_sender(world, certificate, allow_private=False).step()
        assert slack.requests == []
        (delivery,) = world.store.alert_history.deliveries(world.tenant_id).items
        assert delivery.last_error == (
            "refused: hooks.slack.com resolves to the private address 127.0.0.1"
        )
