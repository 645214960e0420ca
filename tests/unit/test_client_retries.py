"""The client rides out a server lost for a moment, and repeats only what is safe to repeat."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import httpx
import pytest

from herder.client import HerderClient
from herder.client import retries as client_retries
from herder.client.errors import ApiError, ServerUnreachable
from herder.client.retries import Retries
from herder.domain.jobs import JobSpec, Runtime
from herder.domain.models import Job, Run
from herder.domain.states import RunState
from tests.clocks import SleepingTime

Answer = httpx.Response | httpx.TransportError


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SleepingTime:
    fake = SleepingTime()
    monkeypatch.setattr(client_retries, "time", fake)
    return fake


def unavailable(retry_after: str | None = "1") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after else {}
    problem = {"title": "Service unavailable", "detail": "the database is unavailable"}
    return httpx.Response(503, json=problem, headers=headers)


NOW = datetime(2026, 12, 6, tzinfo=UTC)
SPEC = JobSpec(runtime=Runtime.SHELL, command="true")


def job() -> httpx.Response:
    stored = Job(id="job_1", name="etl", spec=SPEC, created_at=NOW, updated_at=NOW, version=1)
    return httpx.Response(200, json=stored.model_dump(mode="json"))


def run() -> httpx.Response:
    stored = Run(
        id="run_1", job_id="job_1", job_name="etl", state=RunState.QUEUED, spec=SPEC,
        idempotency_key="key-1", attempt_count=0, cancel_requested=False, created_at=NOW,
        queued_at=NOW, started_at=None, finished_at=None, exit_code=None, reason=None,
    )  # fmt: skip
    return httpx.Response(201, json=stored.model_dump(mode="json"))


class Server:
    """Answers each request with the next of ``answers``, and counts the requests."""

    def __init__(self, answers: Sequence[Answer]) -> None:
        self._answers: Iterator[Answer] = iter(answers)
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = next(self._answers)
        if isinstance(answer, httpx.TransportError):
            raise answer
        return answer


def client_of(server: Server, retries: Retries = Retries()) -> HerderClient:
    http = httpx.Client(base_url="http://herder.test", transport=httpx.MockTransport(server.handle))
    return HerderClient("http://herder.test", "key", http=http, retries=retries)


def test_a_read_waits_out_a_lost_database_as_retry_after_says(clock: SleepingTime) -> None:
    server = Server([unavailable(), unavailable(), job()])
    assert client_of(server).get_job("job_1").name == "etl"
    assert len(server.requests) == 3
    assert clock.pauses == [1.0, 1.0]


def test_a_submission_without_a_key_is_not_sent_twice(clock: SleepingTime) -> None:
    """Its 503 may follow a commit whose answer was lost: a second try could make a second run."""
    server = Server([unavailable(), job()])
    with pytest.raises(ApiError) as raised:
        client_of(server).start_run("job_1")
    assert raised.value.status == 503
    assert len(server.requests) == 1


def test_a_keyed_submission_is_tried_again(clock: SleepingTime) -> None:
    server = Server([unavailable(), httpx.Response(502), run()])
    assert client_of(server).start_run("job_1", idempotency_key="key-1").id == "run_1"
    assert len(server.requests) == 3
    assert {request.headers["Idempotency-Key"] for request in server.requests} == {"key-1"}


def test_a_lasting_503_is_not_tried_again(clock: SleepingTime) -> None:
    """Without Retry-After a 503 is the server's own condition (a key it lacks): no wait."""
    server = Server([unavailable(retry_after=None), job()])
    with pytest.raises(ApiError):
        client_of(server).get_job("job_1")
    assert len(server.requests) == 1


def test_a_load_balancers_502_backs_off_doubling_with_jitter(clock: SleepingTime) -> None:
    server = Server([httpx.Response(502)] * 4 + [job()])
    client_of(server).get_job("job_1")
    for tries, pause in enumerate(clock.pauses):
        ceiling = 0.2 * 2**tries
        assert ceiling / 2 <= pause <= ceiling


def test_the_tries_of_a_call_stop_when_its_budget_is_spent(clock: SleepingTime) -> None:
    server = Server([unavailable()] * 100)
    with pytest.raises(ApiError) as raised:
        client_of(server, Retries(budget_seconds=10)).get_job("job_1")
    assert raised.value.status == 503
    assert sum(clock.pauses) <= 10
    assert len(server.requests) == 11  # the first try, then ten a second apart


def test_no_budget_no_second_try(clock: SleepingTime) -> None:
    server = Server([unavailable(), job()])
    with pytest.raises(ApiError):
        client_of(server, Retries(budget_seconds=0)).get_job("job_1")
    assert len(server.requests) == 1


def test_a_server_not_running_fails_at_once_but_one_restarting_is_waited_for(
    clock: SleepingTime,
) -> None:
    refused = httpx.ConnectError("connection refused")
    first_contact = Server([refused, job()])
    with pytest.raises(ServerUnreachable, match=r"herder\.test"):
        client_of(first_contact).get_job("job_1")
    assert len(first_contact.requests) == 1

    restarting = Server([job(), refused, refused, job()])
    herder = client_of(restarting)
    herder.get_job("job_1")
    herder.get_job("job_1")  # it answered before: the refused connections are a restart
    assert len(restarting.requests) == 4


def test_a_timeout_is_not_tried_again(clock: SleepingTime) -> None:
    """The server may still be working on it."""
    server = Server([job(), httpx.ReadTimeout("slow"), job()])
    herder = client_of(server)
    herder.get_job("job_1")
    with pytest.raises(ServerUnreachable):
        herder.get_job("job_1")
    assert len(server.requests) == 2


def test_each_retry_is_told_with_its_pause(clock: SleepingTime) -> None:
    told: list[tuple[int, float]] = []
    notice = Retries(on_retry=lambda failure, pause: told.append((failure.status, pause)))  # type: ignore[union-attr]
    client_of(Server([unavailable(), job()]), notice).get_job("job_1")
    assert told == [(503, 1.0)]


@pytest.mark.parametrize(("said", "waited"), [("86400", 5.0), ("-3", 0.0)])
def test_a_retry_after_is_bounded(clock: SleepingTime, said: str, waited: float) -> None:
    """A proxy's or a hostile server's Retry-After never parks a call for a day."""
    client_of(Server([unavailable(retry_after=said), job()])).get_job("job_1")
    assert clock.pauses == [waited]


def test_a_retry_after_that_is_no_number_is_none(clock: SleepingTime) -> None:
    """Herder sends whole seconds: anything else makes the 503 a lasting one, not retried."""
    server = Server([unavailable(retry_after="soon"), job()])
    with pytest.raises(ApiError):
        client_of(server).get_job("job_1")
    assert len(server.requests) == 1
