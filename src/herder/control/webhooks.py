"""Posting one webhook: signed, bounded in time and in what is read back, never following
a redirect, and — unless the server allows it — never to a private or loopback address.

A receiver may hang, trickle, redirect or answer gigabytes: the whole attempt is cut at
``TOTAL_SECONDS`` and at most ``MAX_RESPONSE_BYTES`` of the answer are read.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from datetime import datetime
from urllib.parse import urlsplit

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


def body_of(delivery: DueDelivery) -> bytes:
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()


async def _refused_target(url: str) -> str | None:
    """Why the URL's host may not be posted to, if it resolves to a private address."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(parts.hostname or "", port, type=socket.SOCK_STREAM)
    for info in infos:
        address = str(info[4][0])
        if is_private_address(address):
            return f"refused: {parts.hostname} resolves to the private address {address}"
    return None


async def post(
    client: httpx.AsyncClient, delivery: DueDelivery, now: datetime, *, allow_private: bool
) -> AttemptOutcome:
    if delivery.secret is None:
        return AttemptOutcome(None, delivery.unsigned_because)
    body = body_of(delivery)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"herder/{__version__}",
        SIGNATURE_HEADER: signature(delivery.secret, int(now.timestamp()), body),
        DELIVERY_HEADER: delivery.id,
        EVENT_HEADER: delivery.event,
    }

    async def attempt() -> AttemptOutcome:
        if not allow_private and (refused := await _refused_target(delivery.url)):
            return AttemptOutcome(None, refused)
        async with client.stream("POST", delivery.url, content=body, headers=headers) as answer:
            read = 0
            async for chunk in answer.aiter_raw():
                read += len(chunk)
                if read >= MAX_RESPONSE_BYTES:
                    break
        if 200 <= answer.status_code < 300:
            return AttemptOutcome(answer.status_code, None)
        return AttemptOutcome(answer.status_code, f"the receiver answered {answer.status_code}")

    try:
        return await asyncio.wait_for(attempt(), TOTAL_SECONDS)
    except TimeoutError:
        return AttemptOutcome(None, f"no answer within {TOTAL_SECONDS:g}s")
    except (httpx.HTTPError, OSError) as error:
        return AttemptOutcome(None, f"{type(error).__name__}: {error}"[:500])


async def post_all(
    deliveries: Sequence[DueDelivery], now: datetime, *, allow_private: bool
) -> list[AttemptOutcome]:
    """All at once, so one slow receiver delays none of the others."""
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                 timeout=TOTAL_SECONDS) as client:  # fmt: skip
        return list(
            await asyncio.gather(
                *(post(client, one, now, allow_private=allow_private) for one in deliveries)
            )
        )
