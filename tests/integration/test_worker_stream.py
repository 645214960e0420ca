"""The worker's stream (``WS /v1/workers/{id}/stream``): what the dispatcher places on a
worker is pushed to it without a claim, its reports are answered on the same connection with
the same fencing and hand-off, what to stop comes as it happens; a frame the server cannot
take is answered with a problem naming what is wrong and the stream goes on; only the worker's
own secret opens it, and a registration that is over ends it with a code that says why."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import update
from starlette.routing import WebSocketRoute
from starlette.testclient import WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from herder.api.app import ROUTERS
from herder.app import claims
from herder.store.schema import workers
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_hand_off import first_task
from tests.integration.test_worker_protocol import claim, completion, log
from tests.integration.test_workflows import chain, run_of

Stream = Any  # starlette's WebSocketTestSession


@contextmanager
def opened(api: Api, worker_id: str, **want: Any) -> Iterator[Stream]:
    """The worker's stream, its first frame sent: what it wants pushed."""
    path = f"/v1/workers/{worker_id}/stream"
    with api.http.websocket_connect(path, headers=as_worker(worker_id)) as stream:
        stream.send_text(json.dumps({"type": "want", "max_runs": 10, **want}))
        yield stream


def received(stream: Stream) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(stream.receive_text())
    return frame


@contextmanager
def pushed_one(api: Api) -> Iterator[tuple[Stream, dict[str, Any], dict[str, Any]]]:
    """A worker's stream with a run's attempt pushed on it: the stream, the run, the attempt."""
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    with opened(api, worker_id) as stream:
        dispatch(api.store)
        (assignment,) = received(stream)["assignments"]
        yield stream, run, assignment


def reported(stream: Stream, seq: int, **report: Any) -> dict[str, Any]:
    stream.send_text(json.dumps({"type": "report", "seq": seq, "report": report}))
    return received(stream)


def test_what_is_placed_is_pushed_without_a_claim_and_a_claim_after_gets_nothing(
    api: Api,
) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    with opened(api, worker_id) as stream:
        dispatch(api.store)
        frame = received(stream)
        assert frame["type"] == "assignments"
        assert [item["run_id"] for item in frame["assignments"]] == [run["id"]]
        assert claim(api, worker_id)["assignments"] == []
        later = api.start_run(api.create_job("later")["id"])
        dispatch(api.store)
        assert [item["run_id"] for item in received(stream)["assignments"]] == [later["id"]]


def test_a_report_on_the_stream_is_answered_with_its_seq_and_fenced(api: Api) -> None:
    with pushed_one(api) as (stream, run, assignment):
        answer = reported(
            stream, 7, logs=[log(assignment, 0, "hi\n")], completions=[completion(assignment)]
        )
        assert answer["type"] == "results"
        assert answer["seq"] == 7
        assert [result["status"] for result in answer["results"]] == [200]
        stale = {**completion(assignment), "attempt": assignment["attempt"] + 1}
        refused = reported(stream, 8, completions=[stale])
        assert refused["seq"] == 8
        assert [result["status"] for result in refused["results"]] == [409]
    response = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin)
    assert response.json()["state"] == "succeeded"


def test_a_report_asking_for_room_gets_the_next_task_in_its_answer(api: Api) -> None:
    worker_id, flow_run, assignment = first_task(api, chain("a", "b"))
    with opened(api, worker_id) as stream:
        answer = reported(stream, 1, completions=[completion(assignment)], room=4)
        (handed,) = answer["assignments"]
        assert handed["run_id"] == run_of(api, flow_run, "b")


def test_a_cancel_is_pushed_as_it_happens(api: Api) -> None:
    with pushed_one(api) as (stream, run, assignment):
        response = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
        assert response.status_code == 202, response.text
        frame = received(stream)
        assert frame["cancel"] == [assignment["attempt_id"]]
        assert frame["assignments"] == []


@pytest.mark.parametrize(
    ("frame", "named"),
    [
        ({"type": "report", "seq": 3, "report": {"logs": [{"attempt_id": "a"}]}}, "report.logs"),
        ({"type": "report", "seq": -1, "report": {}}, "report.seq"),
        ({"type": "listen", "seq": 1}, "frame"),
        ({"type": "want", "max_runs": 5000}, "want.max_runs"),
        ({"type": "want", "surprise": 1}, "want.surprise"),
        ({"type": "report", "seq": 4, "report": {"completions": [{"reason": "\u0000"}]}}, "NUL"),
        ("not json", "frame"),
        ([1, 2], "frame"),
    ],
)
def test_a_frame_the_server_cannot_take_is_a_problem_naming_it_and_the_stream_goes_on(
    api: Api, frame: object, named: str
) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    with opened(api, worker_id) as stream:
        stream.send_text(frame if isinstance(frame, str) else json.dumps(frame))
        problem = received(stream)
        assert problem["type"] == "problem"
        assert problem["status"] == 422
        assert named in problem["detail"], problem
        seq = frame.get("seq") if isinstance(frame, dict) else None
        assert problem["seq"] == (seq if isinstance(seq, int) and seq >= 0 else None)
        dispatch(api.store)
        assert [item["run_id"] for item in received(stream)["assignments"]] == [run["id"]]


def test_only_the_workers_own_secret_opens_its_stream(api: Api) -> None:
    worker_id = register_worker(api)
    other = register_worker(api, "other")
    path = f"/v1/workers/{worker_id}/stream"
    refusals = {
        "no credentials": ({}, 401),
        "the fleet token": (api.worker, 401),
        "an API key": (api.admin, 403),
        "another worker's secret": (as_worker(other), 401),
    }
    for what, (headers, status) in refusals.items():
        with (
            pytest.raises(WebSocketDenialResponse) as refused,
            api.http.websocket_connect(path, headers=headers),
        ):
            pass
        assert refused.value.status_code == status, what
        assert refused.value.json()["status"] == status, what


def test_a_worker_declared_lost_has_its_stream_ended_with_410(api: Api) -> None:
    worker_id = register_worker(api)
    with opened(api, worker_id) as stream:
        with api.store.database.write() as connection:  # as the reaper does, unheard
            connection.execute(
                update(workers).where(workers.c.id == worker_id).values(state="lost")
            )
        with pytest.raises(WebSocketDisconnect) as ended:
            received(stream)
    assert ended.value.code == 4410


def test_a_forgotten_worker_has_its_stream_ended(api: Api) -> None:
    worker_id = register_worker(api)
    with opened(api, worker_id) as stream:
        with api.store.database.write() as connection:  # silent past its timeout
            connection.execute(
                update(workers).where(workers.c.id == worker_id).values(state="lost")
            )
        response = api.http.post(f"/v1/workers/{worker_id}/forget", headers=api.admin)
        assert response.status_code in (200, 204), response.text
        with pytest.raises(WebSocketDisconnect) as ended:
            received(stream)
    assert ended.value.code in (4401, 4404, 4410)


def test_a_leaving_want_drains_the_worker(api: Api) -> None:
    worker_id = register_worker(api)
    with opened(api, worker_id) as stream:
        stream.send_text(json.dumps({"type": "want", "max_runs": 10, "leaving": True}))
        answer = reported(stream, 1)
        assert answer["results"] == []
    (worker,) = [item for item in api.http.get("/v1/workers", headers=api.admin).json()
                 if item["id"] == worker_id]  # fmt: skip
    assert worker["state"] == "draining"


def test_a_stream_closed_during_a_store_call_ends_only_after_that_call(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Else the call's thread holds a store connection past the stream (and past a test's
    engine: found as an open connection garbage-collected later)."""
    looking, let_go, looked = threading.Event(), threading.Event(), threading.Event()
    claim_with_directives = claims.claim_with_directives

    def slow_look(*args: Any, **kwargs: Any) -> Any:
        looking.set()
        let_go.wait(5)
        answer = claim_with_directives(*args, **kwargs)
        looked.set()
        return answer

    monkeypatch.setattr(claims, "claim_with_directives", slow_look)
    worker_id = register_worker(api)
    with opened(api, worker_id):
        assert looking.wait(5)
        threading.Timer(0.2, let_go.set).start()
    assert looked.is_set()


def test_the_workers_stream_is_the_only_websocket_route() -> None:
    """The access matrix walks the OpenAPI document, which has no WebSocket: a new one must
    come with its own refusals, as the stream's above."""
    paths = [
        route.path
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, WebSocketRoute)
    ]
    assert paths == ["/v1/workers/{worker_id}/stream"]
