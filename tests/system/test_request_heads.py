"""A request's head is bounded by every real server — ``herder server`` (and ``herder up``,
which serves through the same ``server.serve``) and ``--processes N``: a client with no key
sending one header of 256 MiB is cut off (431, or the connection closed) after a little more
than the bound, while other clients are served meanwhile; too many header fields are a 431
problem on any route, before its key is asked for."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest

from herder.http_head import MAX_HEAD_BYTES, MAX_HEADER_FIELDS
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

PIECE = 64 * 1024
ATTEMPTED = 256 * 1024 * 1024  # the header a hostile client means to send
CUT_OFF_BELOW = 32 * 1024 * 1024  # the bound, and whatever the two kernels' buffers hold


@dataclass
class Attempt:
    sent: int = 0
    answer: bytes = b""
    reset: bool = False


def send_a_huge_header(url: str, attempt: Attempt, started: threading.Event) -> None:
    """Sends one header of ``ATTEMPTED`` bytes, until the server stops taking them."""
    address = urlsplit(url)
    with socket.create_connection((str(address.hostname), address.port or 80), timeout=60) as raw:
        try:
            raw.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: herder\r\nX-Big: ")
            while attempt.sent < ATTEMPTED:
                raw.sendall(b"a" * PIECE)
                attempt.sent += PIECE
                started.set()
            attempt.answer = raw.recv(4096)
        except (BrokenPipeError, ConnectionResetError):
            attempt.reset = True  # the server closed it; its answer may be lost to the reset
            with contextlib.suppress(OSError):
                attempt.answer = raw.recv(4096)
        finally:
            started.set()


def ready(url: str) -> int:
    status: int = httpx.get(f"{url}/readyz", timeout=30).status_code
    return status


@pytest.fixture(
    scope="module", params=["server", pytest.param("processes", marks=pytest.mark.postgres)]
)
def cluster(
    request: pytest.FixtureRequest, start_module_cluster: Callable[..., Cluster]
) -> Cluster:
    """The two places a server is configured: ``server.serve`` (``herder server`` and
    ``herder up`` alike) and the pre-forked children of ``--processes N``; each shared by the
    module's tests, which send it requests and never stop or reconfigure it."""
    if request.param == "processes":
        return start_module_cluster(request.getfixturevalue("module_postgres_url"), processes=2)
    return start_module_cluster()


def test_a_huge_header_is_cut_off_early_while_others_are_served(cluster: Cluster) -> None:
    attempt = Attempt()
    started = threading.Event()
    sender = threading.Thread(target=send_a_huge_header, args=(cluster.url, attempt, started))
    sender.start()
    try:
        assert started.wait(60)
        assert ready(cluster.url) == 200  # while the header is being sent, or after
    finally:
        sender.join(120)
    assert not sender.is_alive()
    assert attempt.sent < CUT_OFF_BELOW, f"the server took {attempt.sent} bytes of one header"
    assert attempt.reset or attempt.answer.startswith(b"HTTP/1.1 431 "), attempt.answer[:200]
    assert ready(cluster.url) == 200


def test_too_many_header_fields_are_a_431_problem_before_the_key_is_asked_for(
    cluster: Cluster,
) -> None:
    many = [(f"X-Field-{n}", "v") for n in range(MAX_HEADER_FIELDS + 1)]
    refused = httpx.get(f"{cluster.url}/v1/jobs", headers=many, timeout=30)
    assert refused.status_code == 431
    assert refused.headers["content-type"] == "application/problem+json"
    assert "header fields" in refused.json()["detail"]
    long = httpx.get(f"{cluster.url}/v1/jobs", headers={"X-Long": "v" * MAX_HEAD_BYTES})
    assert long.status_code == 431
    assert "64 KiB" in long.json()["detail"]
    key = cluster.credentials["api_key"]
    usual = [(f"X-Field-{n}", "v" * 100) for n in range(40)]
    served = httpx.get(
        f"{cluster.url}/v1/jobs", headers=[*usual, ("Authorization", f"Bearer {key}")], timeout=30
    )
    assert served.status_code == 200, served.text
