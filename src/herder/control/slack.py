"""Posting a message to a Slack incoming webhook: as a webhook is posted (the name resolved
and every address checked, the connection pinned to a checked one, no redirect, bounded in
time and in what is read back), unsigned — the URL is the credential — and with Slack's own
words for a refusal (``invalid_token``, ``channel_is_archived``…) kept as the error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from herder import __version__
from herder.control.webhooks import (
    TOTAL_SECONDS,
    Refused,
    Resolver,
    checked_addresses,
    post_to_first,
    system_resolver,
)
from herder.store.alerts.deliveries import AttemptOutcome

MAX_SHOWN_ANSWER = 200


async def post_to_slack(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    allow_private: bool,
    resolver: Resolver = system_resolver,
) -> AttemptOutcome:
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json", "User-Agent": f"herder/{__version__}"}
    try:
        async with asyncio.timeout(TOTAL_SECONDS):
            target = httpx.URL(url)
            addresses = await checked_addresses(target, resolver, allow_private=allow_private)
            answer = await post_to_first(client, target, addresses, body, headers)
    except Refused as refused:
        return AttemptOutcome(None, str(refused))
    except TimeoutError:
        return AttemptOutcome(None, f"Slack did not answer within {TOTAL_SECONDS:g}s")
    except (httpx.ConnectError, ConnectionError) as error:
        return AttemptOutcome(None, f"could not connect to Slack: {error}"[:500])
    except (httpx.HTTPError, OSError) as error:
        return AttemptOutcome(None, f"{type(error).__name__}: {error}"[:500])
    if 200 <= answer.status < 300:
        return AttemptOutcome(answer.status, None)
    said = answer.head.decode("utf-8", "replace").strip()[:MAX_SHOWN_ANSWER]
    return AttemptOutcome(answer.status, f"Slack answered {answer.status}: {said or '(nothing)'}")
