"""Posting one webhook: signed, bounded in time and in what is read back, never following
a redirect, and — unless the server allows it — never to a private or loopback address.

A receiver may hang, trickle, redirect or answer gigabytes: the whole attempt is cut at
``TOTAL_SECONDS`` and at most ``MAX_RESPONSE_BYTES`` of the answer are read.

A name is resolved once per attempt, every address it answers is checked, and the request
connects to a checked address (the URL's host is replaced by it, while the ``Host`` header,
TLS SNI and certificate check keep the name): a name that answers a public address to the
check and a loopback one a moment later (DNS rebinding) cannot steer the connection. No
connection is kept for another request, so none verified for one name serves another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import httpx

from herder import __version__
from herder.domain.alerts.webhooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    is_private_address,
    signature,
)
from herder.store.alerts.deliveries import AttemptOutcome, DueDelivery

TOTAL_SECONDS = 5.0
MAX_RESPONSE_BYTES = 4096

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""The addresses a host name answers for a TCP port, in the order to try them."""


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def body_of(delivery: DueDelivery) -> bytes:
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()


class Refused(Exception):
    """The target may not be posted to; the message says why."""


async def checked_addresses(
    url: httpx.URL, resolver: Resolver, *, allow_private: bool
) -> list[str]:
    """The addresses the URL's host answers, each allowed, or ``Refused``."""
    host = url.raw_host.decode("ascii")
    addresses = await resolver(host, url.port or (443 if url.scheme == "https" else 80))
    if not addresses:
        raise Refused(f"refused: {host} resolves to no address")
    if not allow_private:
        for address in addresses:
            if is_private_address(address):
                raise Refused(f"refused: {host} resolves to the private address {address}")
    return addresses


@dataclass(frozen=True)
class Answer:
    status: int
    head: bytes  # at most MAX_RESPONSE_BYTES of the body: what a receiver says went wrong


async def post_to_first(
    client: httpx.AsyncClient, url: httpx.URL, addresses: list[str], body: bytes,
    headers: dict[str, str],
) -> Answer:  # fmt: skip
    """Each checked address in turn until one connects."""
    for address in addresses[:-1]:
        with contextlib.suppress(httpx.ConnectError):
            return await _post_to(client, url, address, body, headers)
    return await _post_to(client, url, addresses[-1], body, headers)


async def _post_to(
    client: httpx.AsyncClient, url: httpx.URL, address: str, body: bytes, headers: dict[str, str]
) -> Answer:
    """POST to ``address`` as if to ``url``'s host; the status and at most
    ``MAX_RESPONSE_BYTES`` of the answer."""
    pinned = client.build_request(
        "POST", url.copy_with(host=address), content=body,
        headers={**headers, "Host": url.netloc.decode("ascii")},
        extensions={"sni_hostname": url.raw_host.decode("ascii")},
    )  # fmt: skip
    answer = await client.send(pinned, stream=True)
    head = b""
    try:
        async for chunk in answer.aiter_raw():
            head += chunk[: MAX_RESPONSE_BYTES - len(head)]
            if len(head) >= MAX_RESPONSE_BYTES:
                break
    finally:
        await answer.aclose()
    return Answer(answer.status_code, head)


async def post(
    client: httpx.AsyncClient,
    delivery: DueDelivery,
    now: datetime,
    *,
    allow_private: bool,
    resolver: Resolver = system_resolver,
) -> AttemptOutcome:
    if delivery.secret is None:
        return AttemptOutcome(None, delivery.unsigned_because)
    body = body_of(delivery)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"herder/{__version__}",
        SIGNATURE_HEADER: signature(
            delivery.secret, int(now.timestamp()), body, delivery=delivery.id, event=delivery.event
        ),
        DELIVERY_HEADER: delivery.id,
        EVENT_HEADER: delivery.event,
    }

    async def attempt() -> AttemptOutcome:
        url = httpx.URL(delivery.url)
        addresses = await checked_addresses(url, resolver, allow_private=allow_private)
        status = (await post_to_first(client, url, addresses, body, headers)).status
        if 200 <= status < 300:
            return AttemptOutcome(status, None)
        return AttemptOutcome(status, f"the receiver answered {status}")

    try:
        async with asyncio.timeout(TOTAL_SECONDS):
            return await attempt()
    except Refused as refused:
        return AttemptOutcome(None, str(refused))
    except TimeoutError:
        return AttemptOutcome(None, f"no answer within {TOTAL_SECONDS:g}s")
    except (httpx.ConnectError, ConnectionError) as error:  # said for people, not as a type
        return AttemptOutcome(None, f"could not connect to the receiver: {error}"[:500])
    except (httpx.HTTPError, OSError) as error:
        return AttemptOutcome(None, f"{type(error).__name__}: {error}"[:500])


def outbound_client(tls: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """The client alerts are posted with: no redirect followed, no proxy from the
    environment, no connection kept (see the module's docstring); ``tls`` trusts more than
    the system's authorities (``HERDER_ALERTS_CA_FILE``)."""
    return httpx.AsyncClient(
        follow_redirects=False, trust_env=False, timeout=TOTAL_SECONDS,
        limits=httpx.Limits(max_keepalive_connections=0), verify=tls or True,
    )  # fmt: skip
