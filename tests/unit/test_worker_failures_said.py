"""What a worker logs when a call to the server fails: one line, with the server's detail."""

from __future__ import annotations

import httpx

from herder.worker.connection import described

REQUEST = httpx.Request("POST", "http://herder.test/v1/workers/wrk_1/claim")


def failure(response: httpx.Response) -> httpx.HTTPStatusError:
    return httpx.HTTPStatusError(
        "Server error '503 …'\nFor more information …", request=REQUEST, response=response
    )


def test_a_problem_is_said_with_its_detail_on_one_line() -> None:
    problem = {"title": "Service unavailable", "detail": "the database is unavailable:\n  refused"}
    said = described(failure(httpx.Response(503, json=problem, request=REQUEST)))
    assert said == "HTTP 503 from /v1/workers/wrk_1/claim: the database is unavailable: refused"


def test_an_answer_without_a_problem_is_its_status_and_path() -> None:
    said = described(failure(httpx.Response(502, text="<html>bad gateway</html>", request=REQUEST)))
    assert said == "HTTP 502 from /v1/workers/wrk_1/claim"


def test_a_transport_error_is_its_own_words() -> None:
    assert described(httpx.ConnectError("connection refused")) == "connection refused"
    assert described(httpx.ReadTimeout("")) == "ReadTimeout"
