"""When the client sends a call again: the server, or the way to it, is lost for a moment (the
database failing over, a server restarting behind a load balancer) and the call is safe to
repeat. A call is safe to repeat when its method is idempotent or it carries an
``Idempotency-Key`` (the server answers the same run for the same key), and a call whose
request never left (a refused connection) is safe to send again whatever it is.

What is tried again: a 503 that says when (``Retry-After``: the store is lost for a moment; a
503 without it is a server's lasting condition, say a key it lacks); a load balancer's 502 or
504 (its backend died or stalled mid-call); a connection broken mid-call. A refused connection
only once the server has answered this client: a first call to a server that is not running
fails at once, with the address it tried. A timeout is not tried again (the server may still be
working on it). Pauses grow from 0.2 s, doubling, to 5 s, with jitter, or follow Retry-After;
all the tries of one call together stop after ``budget_seconds``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import httpx

from herder.client.errors import ApiError

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
BUDGET_SECONDS = 30.0  # a database failover is goaled at 15 s
FIRST_PAUSE_SECONDS = 0.2
MAX_PAUSE_SECONDS = 5.0
GATEWAY_STATUSES = frozenset({502, 504})


def may_repeat(method: str, headers: Mapping[str, str]) -> bool:
    """Whether sending the call twice does what sending it once does."""
    keyed = any(name.lower() == "idempotency-key" for name in headers)
    return method.upper() in IDEMPOTENT_METHODS or keyed


@dataclass(frozen=True)
class Call:
    """What decides whether one call may be tried again."""

    repeatable: bool  # idempotent, or keyed
    replayable: bool  # its body can be sent again (not a stream already read)
    answered_before: bool  # the server answered this client at least once


def worth_retrying(failure: ApiError | httpx.TransportError, call: Call) -> bool:
    if isinstance(failure, ApiError):
        transient = failure.status == 503 and failure.retry_after is not None
        return call.repeatable and (transient or failure.status in GATEWAY_STATUSES)
    if isinstance(failure, httpx.ConnectError):  # nothing was sent
        return call.replayable and call.answered_before
    if isinstance(failure, httpx.TimeoutException):
        return False
    broken = httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError
    return isinstance(failure, broken) and call.repeatable and call.replayable


def pause_before(tries: int, failure: ApiError | httpx.TransportError) -> float:
    """The pause before try ``tries + 1``: Retry-After when the server gave it, else a
    doubling back-off with jitter (so many clients do not come back at once)."""
    if isinstance(failure, ApiError) and failure.retry_after is not None:
        return min(max(failure.retry_after, 0.0), MAX_PAUSE_SECONDS)
    ceiling = min(MAX_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * 2.0**tries)
    return ceiling * random.uniform(0.5, 1.0)


# Told each time a call is tried again: the failure, and the seconds until the next try.
RetryNotice = Callable[[ApiError | httpx.TransportError, float], None]


@dataclass(frozen=True)
class Retries:
    budget_seconds: float = BUDGET_SECONDS  # 0: every call is tried once
    on_retry: RetryNotice | None = None

    def send(
        self, attempt: Callable[[], httpx.Response], call: Call
    ) -> httpx.Response | ApiError | httpx.TransportError:
        """``attempt`` until it answers below 400, or fails in a way not worth another try,
        or the budget is spent: the answer, or the last failure (for the caller to raise)."""
        deadline = time.monotonic() + self.budget_seconds
        tries = 0
        while True:
            failure: ApiError | httpx.TransportError
            try:
                response = attempt()
            except httpx.TransportError as error:
                failure = error
            else:
                if response.status_code < 400:
                    return response
                failure = ApiError.of(response)
                call = replace(call, answered_before=True)
            pause = pause_before(tries, failure)
            if not worth_retrying(failure, call) or time.monotonic() + pause > deadline:
                return failure
            if self.on_retry is not None:
                self.on_retry(failure, pause)
            time.sleep(pause)
            tries += 1
