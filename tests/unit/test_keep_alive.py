"""The Python client drops an idle connection before the server closes it, so a request is
never sent on a connection the server is closing that instant (with both at 5 s, a POST after
5 s idle was now and then reset: ``ServerUnreachable`` in a dashboard test)."""

from __future__ import annotations

from herder.client import HerderClient
from herder.client.herder_client import KEEP_ALIVE_SECONDS
from herder.http_head import SERVER_KEEP_ALIVE_SECONDS


def test_the_client_drops_an_idle_connection_well_before_the_server_closes_it() -> None:
    assert KEEP_ALIVE_SECONDS * 2 <= SERVER_KEEP_ALIVE_SECONDS
    with HerderClient("http://127.0.0.1:9", "key") as client:
        pool = client._http._transport._pool  # type: ignore[attr-defined]
        assert pool._keepalive_expiry == KEEP_ALIVE_SECONDS
