"""A real ``herder scheduler`` beside an API server: it loads the secrets keys to open the
alert channels' signing secrets — its deliveries are signed as receivers check them — and
one started without the key records why it could not sign, and keeps running."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from herder.domain.alerts.webhooks import SIGNATURE_HEADER
from herder.keyring import new_key
from tests.integration.test_alert_deliveries import verified
from tests.integration.webhook_receiver import running_receiver
from tests.system.conftest import Cluster, wait_until

pytestmark = [pytest.mark.system, pytest.mark.postgres]


def test_a_scheduler_signs_with_the_key_and_without_it_records_why(
    start_cluster: Callable[..., Cluster], system_postgres_url: str
) -> None:
    keys = {"HERDER_SECRETS_KEY": new_key(), "HERDER_ALERTS_PRIVATE_TARGETS": "1"}
    cluster = start_cluster(system_postgres_url, scheduler=False, environment=keys)
    with running_receiver() as receiver, cluster.client() as herder:
        channel = herder.create_alert_channel("ops", f"{receiver.url}/hook")
        assert channel.secret is not None
        keyless = cluster.spawn("scheduler", HERDER_SECRETS_KEY="")
        herder.test_alert_channel(channel.id)

        def recorded() -> bool:
            (delivery,) = herder.list_alert_deliveries(channel_id=channel.id).items
            return delivery.last_error is not None

        wait_until(recorded, 30, "the keyless scheduler's attempt to be recorded")
        (delivery,) = herder.list_alert_deliveries(channel_id=channel.id).items
        assert "does not open" in str(delivery.last_error)
        assert "HERDER_SECRETS_KEY" in str(delivery.last_error)
        assert receiver.requests == []
        assert keyless.poll() is None  # still running
        keyless.terminate()
        keyless.wait(15)

        cluster.spawn("scheduler")  # with the keys: it takes the loops over
        herder.test_alert_channel(channel.id)
        wait_until(lambda: len(receiver.requests) >= 1, 60, "a signed delivery")
        request = receiver.requests[0]
        verified(request.body, request.headers[SIGNATURE_HEADER], channel.secret)
