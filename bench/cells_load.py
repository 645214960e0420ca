"""The cells scenario's load: each tenant's one-off runs submitted through the edge at a
steady rate, one after the other, each with an idempotency key of its own. Every answer is
kept with the phase it was sent in (the scenario names the phase it is in) and how long it
took, so the phases' latencies and errors are counted afterwards from what was answered."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from herder.client import HerderClient
from herder.client.errors import ApiError, ClientError

NO_ANSWER = 0  # the status of a call that got no HTTP answer (or that the client gave up on)


@dataclass(frozen=True)
class Answer:
    phase: str
    sent: float  # monotonic
    seconds: float
    status: int
    cell: str | None = None  # the cell a 503 names
    run_id: str | None = None  # acknowledged: the run it made

    @property
    def accepted(self) -> bool:
        return self.run_id is not None

    def unavailable(self, cell: str) -> bool:
        """A 503 naming ``cell`` (its own answer, or the edge's for it)."""
        return self.status == 503 and self.cell == cell


@dataclass
class Phase:
    """The phase the scenario is in, read at each submission."""

    name: str = "warm-up"


# One submission: (status, the cell a problem names, the run id when accepted).
Send = Callable[[], tuple[int, str | None, str | None]]


def never_retried(http: httpx.Client, key: str, job_id: str) -> Send:
    """A keyed submission through the edge, as ``curl`` would send it: once."""

    def send() -> tuple[int, str | None, str | None]:
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": uuid.uuid4().hex}
        try:
            answer = http.post(f"/v1/jobs/{job_id}/runs", headers=headers, json={})
        except httpx.TransportError:
            return NO_ANSWER, None, None
        if answer.status_code >= 400:
            return answer.status_code, _cell_named(answer), None
        return answer.status_code, None, str(answer.json()["id"])

    return send


def _cell_named(answer: httpx.Response) -> str | None:
    try:
        named = answer.json().get("cell")
    except (ValueError, AttributeError):  # not a problem document
        return None
    return named if isinstance(named, str) else None


def retried(client: HerderClient, job_id: str) -> Send:
    """A keyed submission through the client, which tries it again on a 503 (a tenant
    moving answers its writes so) until its budget is spent."""

    def send() -> tuple[int, str | None, str | None]:
        try:
            run = client.start_run(job_id, idempotency_key=uuid.uuid4().hex)
        except ApiError as error:
            return error.status, None, None
        except ClientError:
            return NO_ANSWER, None, None
        return 201, None, run.id

    return send


@dataclass
class Submitter:
    """One tenant's submissions, ``rate`` a second, until ``stop``: a call slower than the
    pace is followed at once by the next, never by a burst to catch up."""

    cell: str
    send: Send
    rate: float
    phase: Phase
    stop: threading.Event
    answers: list[Answer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"submitter-{self.cell}")

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop.is_set():
            phase, sent = self.phase.name, time.monotonic()
            status, cell, run_id = self.send()
            self.answers.append(
                Answer(phase, sent, time.monotonic() - sent, status, cell=cell, run_id=run_id)
            )
            next_at = max(next_at + interval, time.monotonic())
            self.stop.wait(next_at - time.monotonic())

    def acknowledged(self) -> list[str]:
        return [answer.run_id for answer in self.answers if answer.run_id is not None]

    def accepted_since(self, moment: float) -> bool:
        return any(answer.accepted and answer.sent > moment for answer in list(self.answers))
