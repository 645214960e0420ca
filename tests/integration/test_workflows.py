"""Workflows through the API, with a worker driven by hand: each task's successors are
decided in the request that ends it, by Airflow's trigger rules."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, report


class Fleet:
    """One worker, run by the test: it ends each task's attempt as told."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.worker_id = register_worker(api)
        self.held: dict[str, dict[str, Any]] = {}  # run id → its running assignment

    def claim(self) -> set[str]:
        """Take every queued run; the run ids taken."""
        taken = claim(self.api, self.worker_id, max_runs=100)["assignments"]
        for assignment in taken:
            self.held[assignment["run_id"]] = assignment
        return {assignment["run_id"] for assignment in taken}

    def end(self, run_id: str, outcome: str = "succeeded") -> None:
        assignment = self.held.pop(run_id)
        code = 0 if outcome == "succeeded" else 1
        (result,) = report(
            self.api, self.worker_id, completions=[completion(assignment, outcome, code)]
        )
        assert result["status"] == 200, result


def job(api: Api, name: str) -> None:
    api.create_job(name, retry={"max_attempts": 1})


def workflow(api: Api, name: str = "flow", **body: Any) -> dict[str, Any]:
    response = api.http.post("/v1/workflows", headers=api.admin, json={"name": name, **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def start(api: Api, workflow_id: str, **body: Any) -> dict[str, Any]:
    response = api.http.post(f"/v1/workflows/{workflow_id}/runs", headers=api.admin, json=body)
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


def detail(api: Api, workflow_run_id: str) -> dict[str, Any]:
    response = api.http.get(f"/v1/workflow-runs/{workflow_run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def states(api: Api, workflow_run_id: str) -> dict[str, str]:
    return {task["task"]: task["state"] for task in detail(api, workflow_run_id)["tasks"]}


def run_of(api: Api, workflow_run_id: str, task: str) -> str:
    (found,) = [t for t in detail(api, workflow_run_id)["tasks"] if t["task"] == task]
    run_id: str = found["run_id"]
    return run_id


def chain(*names: str) -> list[dict[str, Any]]:
    tasks = [{"name": names[0], "job": "work"}]
    tasks += [
        {"name": name, "job": "work", "depends_on": [prev]} for prev, name in zip(names, names[1:])
    ]
    return tasks


@pytest.fixture
def fleet(api: Api) -> Fleet:
    job(api, "work")
    return Fleet(api)


def test_a_chain_runs_each_task_when_the_one_before_succeeds(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b", "c"))
    run = start(api, flow["id"])
    assert run["state"] == "running" and run["version"] == 1
    assert states(api, run["id"]) == {"a": "queued", "b": "pending", "c": "pending"}
    pending = detail(api, run["id"])["tasks"][1]
    assert pending["reason"] == "waiting on 1 of 1 upstream task(s) (all_success)"

    for task in ("a", "b", "c"):
        assert fleet.claim() == {run_of(api, run["id"], task)}
        fleet.end(run_of(api, run["id"], task))

    ended = detail(api, run["id"])
    assert ended["state"] == "succeeded"
    assert [task["state"] for task in ended["tasks"]] == ["succeeded"] * 3


def test_a_failure_fails_its_dependants_and_starts_its_handlers(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        tasks=[
            {"name": "train", "job": "work"},
            {"name": "evaluate", "job": "work", "depends_on": ["train"]},
            {
                "name": "notify",
                "job": "work",
                "depends_on": ["train"],
                "trigger_rule": "one_failed",
            },
            {
                "name": "cleanup",
                "job": "work",
                "depends_on": ["evaluate"],
                "trigger_rule": "all_done",
            },
        ],
    )
    run = start(api, flow["id"])
    fleet.claim()
    fleet.end(run_of(api, run["id"], "train"), "failed")

    assert states(api, run["id"]) == {
        "train": "failed", "evaluate": "upstream_failed", "notify": "queued", "cleanup": "queued",
    }  # fmt: skip
    evaluate = [t for t in detail(api, run["id"])["tasks"] if t["task"] == "evaluate"][0]
    assert evaluate["reason"] == "all_success cannot be met: 1 failed"
    for run_id in fleet.claim():
        fleet.end(run_id)
    ended = detail(api, run["id"])
    assert ended["state"] == "succeeded"  # every leaf (notify, cleanup) succeeded
    assert "train" in ended["reason"]


def test_a_failed_leaf_fails_the_run_naming_the_failed_tasks(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b"))
    run = start(api, flow["id"])
    fleet.claim()
    fleet.end(run_of(api, run["id"], "a"), "failed")
    ended = detail(api, run["id"])
    assert ended["state"] == "failed"
    assert ended["reason"] == "failed tasks: a (failed), b (upstream_failed)"


def test_one_success_starts_at_the_first_success(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        tasks=[
            {"name": "fast", "job": "work"},
            {"name": "slow", "job": "work"},
            {
                "name": "first",
                "job": "work",
                "depends_on": ["fast", "slow"],
                "trigger_rule": "one_success",
            },
        ],
    )
    run = start(api, flow["id"])
    fleet.claim()
    fleet.end(run_of(api, run["id"], "fast"))
    assert states(api, run["id"]) == {"fast": "succeeded", "slow": "running", "first": "queued"}


def test_always_starts_with_the_workflow_run(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        tasks=[
            *chain("a", "b"),
            {"name": "watch", "job": "work", "depends_on": ["b"], "trigger_rule": "always"},
        ],
    )
    run = start(api, flow["id"])
    assert states(api, run["id"]) == {"a": "queued", "b": "pending", "watch": "queued"}
