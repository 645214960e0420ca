"""A run's output through the worker protocol: kept when its attempt succeeds, checked again
whatever the worker says; and a workflow task's assignment says which task it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from herder.domain.lifecycle.changes import TaskOf
from herder.domain.outputs import MAX_OUTPUT_BYTES
from tests.integration.conftest import Api
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_worker_protocol import claim, completion, report
from tests.task_runs import insert_task_run


def run_detail(api: Api, run_id: object) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    detail: dict[str, Any] = response.json()
    return detail


def started(api: Api) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A worker, and a run it has claimed (its assignment)."""
    worker_id = register_worker(api)
    run = api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    return worker_id, run, assignment


def test_a_succeeded_attempts_output_is_kept_on_its_run(api: Api) -> None:
    worker_id, run, assignment = started(api)
    output = {"rows": 3, "files": ["a.csv", "é.csv"], "ok": True, "ratio": 0.5, "none": None}
    (result,) = report(api, worker_id, completions=[{**completion(assignment), "output": output}])
    assert result["status"] == 200
    detail = run_detail(api, run["id"])
    assert (detail["state"], detail["output"]) == ("succeeded", output)
    assert (detail["workflow_run_id"], detail["task_name"], detail["map_index"]) == (None,) * 3


def test_a_run_without_output_shows_none(api: Api) -> None:
    worker_id, run, assignment = started(api)
    report(api, worker_id, completions=[completion(assignment)])
    assert run_detail(api, run["id"])["output"] is None


def test_output_at_the_limit_is_kept(api: Api) -> None:
    worker_id, run, assignment = started(api)
    output = "x" * (MAX_OUTPUT_BYTES - 2)  # with its quotes: exactly 64 KiB
    report(api, worker_id, completions=[{**completion(assignment), "output": output}])
    detail = run_detail(api, run["id"])
    assert (detail["state"], detail["output"]) == ("succeeded", output)


def test_a_too_large_output_from_a_worker_fails_the_attempt_and_is_not_kept(api: Api) -> None:
    worker_id, run, assignment = started(api)
    output = {"blob": "x" * 70_000}
    (result,) = report(api, worker_id, completions=[{**completion(assignment), "output": output}])
    assert result["status"] == 200
    detail = run_detail(api, run["id"])
    assert detail["state"] == "failed"
    assert detail["output"] is None
    why = "the output reported is 70,011 bytes; at most 65,536 (64 KiB) are kept"
    assert detail["reason"] == why
    assert detail["attempts"][0]["reason"] == why


@pytest.mark.parametrize(
    ("raw_output", "why"),
    [
        ("NaN", "the output reported contains the number nan"),
        ("[1e999]", "the output reported contains the number inf"),
        ("[" * 120 + "]" * 120, "the output reported is nested more than 100 levels deep"),
    ],
)
def test_what_jsonb_cannot_hold_fails_the_attempt_not_the_server(
    api: Api, raw_output: str, why: str
) -> None:
    """Sent raw: JSON a hostile worker can write, which no JSON encoder would."""
    worker_id, run, assignment = started(api)
    body = json.dumps({"completions": [completion(assignment)]})
    body = body.replace('"outcome": "succeeded"', f'"outcome": "succeeded", "output": {raw_output}')
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers={**as_worker(worker_id), "Content-Type": "application/json"},
        content=body,
    )
    assert response.status_code == 200, response.text
    detail = run_detail(api, run["id"])
    assert (detail["state"], detail["output"]) == ("failed", None)
    assert detail["reason"].startswith(why)


def test_a_nul_in_an_output_is_refused_at_the_edge(api: Api) -> None:
    worker_id, run, assignment = started(api)
    bad = {**completion(assignment), "output": {"a": "\x00"}}
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [bad]},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "completions.0.output.a"
    assert run_detail(api, run["id"])["state"] == "running"


def test_a_huge_report_is_refused_whole(api: Api) -> None:
    worker_id, run, assignment = started(api)
    bad = {**completion(assignment), "output": "x" * (5 * 1024 * 1024)}
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [bad]},
    )
    assert response.status_code == 413
    assert run_detail(api, run["id"])["state"] == "running"


def test_a_failed_attempts_output_is_not_kept(api: Api) -> None:
    worker_id, run, assignment = started(api)
    failed = {**completion(assignment, "failed", 1), "output": {"rows": 3}}
    report(api, worker_id, completions=[failed])
    detail = run_detail(api, run["id"])
    assert (detail["state"], detail["output"]) == ("failed", None)


def test_the_output_of_an_attempt_that_succeeded_late_is_not_kept(api: Api) -> None:
    worker_id, run, assignment = started(api)
    report(api, worker_id, completions=[completion(assignment, "failed", 1)])
    late = {**completion(assignment), "output": {"rows": 3}}
    (result,) = report(api, worker_id, completions=[late])
    assert result["status"] == 409
    assert run_detail(api, run["id"])["output"] is None


def test_another_workers_report_cannot_set_an_output(api: Api) -> None:
    _, run, assignment = started(api)
    intruder = register_worker(api)
    forged = {**completion(assignment), "output": {"forged": True}}
    (result,) = report(api, intruder, completions=[forged])
    assert result["status"] == 404
    detail = run_detail(api, run["id"])
    assert (detail["state"], detail["output"]) == ("running", None)


def test_a_task_runs_assignment_says_which_task_and_its_inputs(api: Api) -> None:
    worker_id = register_worker(api)
    job = api.create_job()
    inputs = {"extract": {"rows": 3}, "shards": [{"n": 1}, None]}
    task = TaskOf("wfr_1", "load", repair=0, map_index=2, map_item={"day": 2}, inputs=inputs)
    run_id = insert_task_run(api.store, api.tenant_id, str(job["id"]), task)
    (assignment,) = claim(api, worker_id)["assignments"]
    assert assignment["run_id"] == run_id
    assert assignment["task"] == {
        "workflow_run_id": "wfr_1",
        "task_name": "load",
        "map_index": 2,
        "map_item": {"day": 2},
        "inputs": inputs,
    }
    detail = run_detail(api, run_id)
    assert (detail["workflow_run_id"], detail["task_name"], detail["map_index"]) == (
        "wfr_1",
        "load",
        2,
    )
    listed = api.http.get("/v1/runs", headers=api.admin).json()["items"]
    assert [(item["id"], item["task_name"]) for item in listed] == [(run_id, "load")]
    assert "output" not in listed[0]


def test_a_plain_runs_assignment_has_no_task(api: Api) -> None:
    _, _, assignment = started(api)
    assert assignment["task"] is None


def test_another_tenant_cannot_read_a_runs_output(api: Api) -> None:
    worker_id, run, assignment = started(api)
    secret = {"token": "s3cret"}
    report(api, worker_id, completions=[{**completion(assignment), "output": secret}])
    other = api.as_key(api.other_tenant_key())
    response = api.http.get(f"/v1/runs/{run['id']}", headers=other)
    assert response.status_code == 404
    assert "s3cret" not in response.text
