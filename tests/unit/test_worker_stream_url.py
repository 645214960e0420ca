"""Where a worker opens its stream: the server's URL with the WebSocket scheme that matches
it (TLS stays TLS), under any path prefix a balancer gives the API."""

from __future__ import annotations

import pytest

from herder.worker.stream import stream_url


@pytest.mark.parametrize(
    ("server", "stream"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/workers/wrk_1/stream"),
        ("https://herder.example.com/", "wss://herder.example.com/v1/workers/wrk_1/stream"),
        ("http://lb:80/herder", "ws://lb:80/herder/v1/workers/wrk_1/stream"),
    ],
)
def test_a_stream_opens_at_the_servers_url_with_the_matching_scheme(
    server: str, stream: str
) -> None:
    assert stream_url(server, "wrk_1") == stream
