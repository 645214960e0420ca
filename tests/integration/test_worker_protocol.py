"""The worker protocol: claims fit capacity, reports are fenced, cancels reach the worker."""

from __future__ import annotations

import base64
from typing import Any

from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker


def claim(api: Api, worker_id: str, max_runs: int = 10, wait: float = 0) -> dict[str, Any]:
    """A dispatcher pass, then the worker's claim."""
    dispatch(api.store)
    response = api.http.post(
        f"/v1/workers/{worker_id}/claim",
        headers=as_worker(worker_id),
        json={"max_runs": max_runs, "wait_seconds": wait},
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def report(api: Api, worker_id: str, **body: Any) -> list[dict[str, Any]]:
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports", headers=as_worker(worker_id), json=body
    )
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def completion(
    assignment: dict[str, Any], outcome: str = "succeeded", code: int | None = 0
) -> dict[str, Any]:
    return {
        "attempt_id": assignment["attempt_id"],
        "attempt": assignment["attempt"],
        "outcome": outcome,
        "exit_code": code,
        "reason": f"exit {code}",
        "usage": {"cpu_user_seconds": 0.01, "cpu_system_seconds": 0.0, "max_rss_kb": 1000},
    }


def log(assignment: dict[str, Any], seq: int, text: str, stream: str = "stdout") -> dict[str, Any]:
    return {
        "attempt_id": assignment["attempt_id"],
        "attempt": assignment["attempt"],
        "seq": seq,
        "stream": stream,
        "data_b64": base64.b64encode(text.encode()).decode(),
    }


def test_a_claim_takes_only_what_fits_the_worker(api: Api) -> None:
    worker_id = register_worker(api, cpu=2, memory_mb=1024)
    job = api.create_job(resources={"cpu": 1, "memory_mb": 256})
    for _ in range(3):
        api.start_run(job["id"])
    assert len(claim(api, worker_id)["assignments"]) == 2
    assert claim(api, worker_id)["assignments"] == []


def test_a_claim_follows_priority_then_age(api: Api) -> None:
    worker_id = register_worker(api, cpu=1)
    low = api.start_run(api.create_job("low", priority="low")["id"])
    high = api.start_run(api.create_job("high", priority="high")["id"])
    assignments = claim(api, worker_id, max_runs=1)["assignments"]
    assert [item["run_id"] for item in assignments] == [high["id"]]
    del low


def test_a_finished_attempt_ends_the_run_with_its_logs(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    assert assignment["spec"]["command"] == "echo hello"
    results = report(
        api,
        worker_id,
        logs=[log(assignment, 0, "hello\n"), log(assignment, 1, "oops\n", "stderr")],
        completions=[completion(assignment)],
    )
    assert [result["status"] for result in results] == [200]
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["state"] == "succeeded"
    assert detail["exit_code"] == 0
    (attempt,) = detail["attempts"]
    assert attempt["state"] == "succeeded"
    assert attempt["max_rss_kb"] == 1000
    assert attempt["stopped_by"] is None
    logs = api.http.get(f"/v1/runs/{run['id']}/logs", headers=api.admin).json()
    assert [(chunk["stream"], chunk["text"]) for chunk in logs["chunks"]] == [
        ("stdout", "hello\n"),
        ("stderr", "oops\n"),
    ]
    assert logs["complete"] is True


def test_a_late_report_is_refused_with_409_and_recorded(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    report(api, worker_id, completions=[completion(assignment, "failed", 1)])
    (late,) = report(api, worker_id, completions=[completion(assignment)])
    assert late["status"] == 409
    stale = dict(completion(assignment), attempt=assignment["attempt"] + 1)
    (wrong_number,) = report(api, worker_id, completions=[stale])
    assert wrong_number["status"] == 409
    (late_log,) = report(api, worker_id, logs=[log(assignment, 5, "zombie")])
    assert late_log["status"] == 409
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["state"] == "failed"  # never overwritten by the late success
    refusals = [event for event in detail["events"] if "refused" in event["message"]]
    assert len(refusals) == 3
    single = api.http.post(
        f"/v1/attempts/{assignment['attempt_id']}/complete",
        headers=as_worker(worker_id),
        json={"worker_id": worker_id, "completion": completion(assignment)},
    )
    assert single.status_code == 409


def test_another_workers_attempt_is_not_found(api: Api) -> None:
    first, second = register_worker(api), register_worker(api)
    api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, first)["assignments"]
    (result,) = report(api, second, completions=[completion(assignment)])
    assert result["status"] == 404


def test_an_assignment_carries_the_jobs_stop_grace(api: Api) -> None:
    worker_id = register_worker(api)
    api.start_run(api.create_job(stop_grace_seconds=7)["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    assert assignment["spec"]["stop_grace_seconds"] == 7


def test_how_a_stopped_attempt_ended_is_kept_on_it(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    stopped = completion(assignment, "cancelled", None) | {"stopped_by": "sigkill"}
    report(api, worker_id, completions=[stopped])
    (attempt,) = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()["attempts"]
    assert (attempt["state"], attempt["stopped_by"]) == ("cancelled", "sigkill")


def test_a_stop_that_is_no_signal_is_refused(api: Api) -> None:
    worker_id = register_worker(api)
    api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [completion(assignment, "cancelled", None) | {"stopped_by": "x"}]},
    )
    assert response.status_code == 422


def test_cancelling_a_running_run_tells_its_worker(api: Api) -> None:
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    response = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert response.status_code == 202
    assert response.json()["cancel_requested"] is True
    assert claim(api, worker_id, wait=5)["cancel"] == [assignment["attempt_id"]]
    heartbeat = api.http.post(
        f"/v1/workers/{worker_id}/heartbeat",
        headers=as_worker(worker_id),
        json={
            "running": [
                {"attempt_id": assignment["attempt_id"], "attempt": assignment["attempt"]},
                {"attempt_id": "att_unknown", "attempt": 1},
            ]
        },
    ).json()
    assert heartbeat == {
        "cancel": [assignment["attempt_id"]],
        "drop": ["att_unknown"],
        "preempt": [],
    }
    report(api, worker_id, completions=[completion(assignment, "cancelled", None)])
    final = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert final["state"] == "cancelled"


def test_output_past_the_limit_is_cut(api: Api) -> None:
    api.store.attempts.max_log_bytes = 10
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    report(api, worker_id, logs=[log(assignment, 0, "12345"), log(assignment, 1, "678901")])
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["attempts"][0]["log_truncated"] is True
    assert detail["attempts"][0]["log_bytes"] == 5


def test_output_sent_again_is_stored_once_and_counted_once_against_the_cap(api: Api) -> None:
    """A report's answer was lost (the server died after the commit) and the worker sends
    the same chunks again: they take no more of the attempt's room."""
    api.store.attempts.max_log_bytes = 10
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    first = [log(assignment, 0, "12345")]
    report(api, worker_id, logs=first)
    report(api, worker_id, logs=first)
    report(api, worker_id, logs=[log(assignment, 1, "67890")])
    (attempt,) = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()["attempts"]
    assert (attempt["log_bytes"], attempt["log_truncated"]) == (10, False)
    logs = api.http.get(f"/v1/runs/{run['id']}/logs", headers=api.admin).json()
    assert "".join(chunk["text"] for chunk in logs["chunks"]) == "1234567890"


def test_a_worker_downloads_only_artifacts_of_its_attempts(api: Api) -> None:
    worker_id = register_worker(api)
    data = b"print('hi')\n"
    artifact = api.http.post(
        "/v1/artifacts", headers=api.admin, files={"file": ("a.py", data)}
    ).json()
    url = f"/v1/workers/{worker_id}/artifacts/{artifact['id']}"
    assert api.http.get(url, headers=as_worker(worker_id)).status_code == 404
    job = api.create_job("py", runtime="python", command=None, artifact=artifact["id"])
    api.start_run(job["id"])
    claim(api, worker_id)
    assert api.http.get(url, headers=as_worker(worker_id)).content == data


def test_output_that_is_not_base64_is_refused(api: Api) -> None:
    worker_id = register_worker(api)
    api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    garbled = {**log(assignment, 0, "hello"), "data_b64": "not base64!"}
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports", headers=as_worker(worker_id), json={"logs": [garbled]}
    )
    assert response.status_code == 422
    assert "data_b64 is not valid base64" in response.json()["detail"]
