"""Herder's own alert webhooks sign the ``herder`` scheme's ``v2`` (issue 40): a hook of that
scheme takes them, and a delivery id or event changed on the way is refused."""

from __future__ import annotations

import pytest

from herder.domain.hooks import HookScheme, Unverified, verify
from tests.integration.test_alert_deliveries import World, world  # noqa: F401 (a fixture)


def test_an_alert_webhook_verifies_as_a_herder_hook_delivery_with_its_id_and_event_bound(
    world: World,  # noqa: F811
) -> None:
    channel_id, secret = world.channel()
    world.store.alert_channels.send_test(world.tenant_id, channel_id)
    world.sender.step()
    (sent,) = world.receiver.requests
    headers = {name.lower(): value for name, value in sent.headers.items()}
    assert ",v2=" in headers["x-herder-signature"]
    delivery = verify(HookScheme.HERDER, secret, headers, sent.body, world.clock.now())
    assert (delivery.delivery_id, delivery.kind) == (headers["x-herder-delivery"], "test")
    for changed in ({"x-herder-event": "opened"}, {"x-herder-delivery": "dlv_other"}):
        with pytest.raises(Unverified, match="does not match"):
            verify(HookScheme.HERDER, secret, {**headers, **changed}, sent.body, world.clock.now())
