"""Workflows through the API, with a worker driven by hand: each task's successors are
decided in the request that ends it, by Airflow's trigger rules."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import select

from herder.domain.states import RunState
from herder.domain.workflows.walk import TaskRunFact, tally
from herder.store.schema import runs
from herder.store.workflows.progress import tallies_of
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, report


class Fleet:
    """One worker, run by the test: it ends each task's attempt as told."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.worker_id = register_worker(api, cpu=64, memory_mb=65536)
        self.held: dict[str, dict[str, Any]] = {}  # run id → its running assignment

    def claim(self) -> set[str]:
        """Take every queued run; the run ids taken."""
        taken = claim(self.api, self.worker_id, max_runs=100)["assignments"]
        for assignment in taken:
            self.held[assignment["run_id"]] = assignment
        return {assignment["run_id"] for assignment in taken}

    def end(self, run_id: str, outcome: str = "succeeded", output: Any = None) -> None:
        assignment = self.held.pop(run_id)
        code = 0 if outcome == "succeeded" else 1
        ended = {**completion(assignment, outcome, code), "output": output}
        (result,) = report(self.api, self.worker_id, completions=[ended])
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
    tasks: list[dict[str, Any]] = [{"name": names[0], "job": "work"}]
    tasks += [
        {"name": name, "job": "work", "depends_on": [prev]}
        for prev, name in itertools.pairwise(names)
    ]
    return tasks


@pytest.fixture
def fleet(api: Api) -> Fleet:
    job(api, "work")
    return Fleet(api)


def test_a_chain_runs_each_task_when_the_one_before_succeeds(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b", "c"))
    run = start(api, flow["id"])
    assert run["state"] == "running"
    assert run["version"] == 1
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
    evaluate = next(t for t in detail(api, run["id"])["tasks"] if t["task"] == "evaluate")
    assert evaluate["reason"] == "all_success cannot be met: 1 failed"
    for run_id in fleet.claim():
        fleet.end(run_id)
    ended = detail(api, run["id"])
    assert ended["state"] == "succeeded"  # every leaf (notify, cleanup) succeeded
    assert "train" in ended["reason"]
    assert ended["failed_tasks"] == ["train", "evaluate"]
    assert ended["outcome"] == "succeeded, 2 tasks failed and were handled"


def test_a_failed_leaf_fails_the_run_naming_the_failed_tasks(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b"))
    run = start(api, flow["id"])
    fleet.claim()
    fleet.end(run_of(api, run["id"], "a"), "failed")
    ended = detail(api, run["id"])
    assert ended["state"] == "failed"
    assert ended["reason"] == "failed tasks: a (failed), b (upstream_failed)"
    assert (ended["outcome"], ended["failed_tasks"]) == ("failed", ["a", "b"])


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


def problem(api: Api, method: str, path: str, status: int, **body: Any) -> dict[str, Any]:
    response = api.http.request(method, path, headers=api.admin, json=body)
    assert response.status_code == status, response.text
    found: dict[str, Any] = response.json()
    return found


def fields(found: dict[str, Any]) -> list[str]:
    return [error["field"] for error in found.get("errors", [])]


def test_a_cycle_is_refused_naming_it(api: Api, fleet: Fleet) -> None:
    tasks = [
        {"name": "a", "job": "work", "depends_on": ["c"]},
        {"name": "b", "job": "work", "depends_on": ["a"]},
        {"name": "c", "job": "work", "depends_on": ["b"]},
    ]
    found = problem(api, "POST", "/v1/workflows", 422, name="loop", tasks=tasks)
    assert "a → b → c → a" in found["detail"]
    assert fields(found) == ["tasks.1.depends_on"]  # b depends on a: the link that closes it


@pytest.mark.parametrize(
    ("tasks", "field"),
    [
        ([{"name": "a", "job": "missing"}], "tasks.0.job"),
        ([{"name": "a", "job": "work"}, {"name": "a", "job": "work"}], "tasks.1.name"),
        ([{"name": "a", "job": "work", "depends_on": ["nope"]}], "tasks.0.depends_on"),
        ([{"name": "a", "job": "work", "map_over": "params.files"}], "tasks.0.map_over"),
        ([{"name": "a", "job": "work", "trigger_rule": "sometimes"}], "tasks.0.trigger_rule"),
        ([], "tasks"),
    ],
)
def test_a_bad_definition_is_refused_naming_its_field(
    api: Api, fleet: Fleet, tasks: list[dict[str, Any]], field: str
) -> None:
    found = problem(api, "POST", "/v1/workflows", 422, name="bad", tasks=tasks)
    assert field in fields(found), found
    assert api.http.get("/v1/workflows", headers=api.admin).json()["items"] == []


def test_more_than_a_thousand_tasks_are_refused(api: Api, fleet: Fleet) -> None:
    tasks = [{"name": f"t{i}", "job": "work"} for i in range(1001)]
    found = problem(api, "POST", "/v1/workflows", 422, name="huge", tasks=tasks)
    assert fields(found) == ["tasks"]


def test_another_tenants_workflows_and_runs_are_not_found(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"))
    run = start(api, flow["id"])
    other = api.as_key(api.other_tenant_key())
    for method, path in [
        ("GET", f"/v1/workflows/{flow['id']}"),
        ("PUT", f"/v1/workflows/{flow['id']}"),
        ("DELETE", f"/v1/workflows/{flow['id']}"),
        ("POST", f"/v1/workflows/{flow['id']}/runs"),
        ("GET", f"/v1/workflow-runs/{run['id']}"),
        ("POST", f"/v1/workflow-runs/{run['id']}/cancel"),
    ]:
        body = {"name": "flow", "tasks": chain("a")} if method == "PUT" else None
        response = api.http.request(method, path, headers=other, json=body)
        assert response.status_code == 404, (method, path, response.text)
    response = api.http.post(
        f"/v1/workflow-runs/{run['id']}/repair", headers=other, json={"repair": 0}
    )
    assert response.status_code == 404
    assert api.http.get("/v1/workflow-runs", headers=other).json()["items"] == []


def test_a_task_of_another_tenants_job_is_refused(api: Api, fleet: Fleet) -> None:
    other = api.as_key(api.other_tenant_key())
    response = api.http.post(
        "/v1/workflows", headers=other, json={"name": "steal", "tasks": chain("a")}
    )
    assert response.status_code == 422
    assert fields(response.json()) == ["tasks.0.job"]


def test_the_same_idempotency_key_answers_with_the_same_run(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"))
    headers = {**api.admin, "Idempotency-Key": "nightly-2026-11-24"}
    first = api.http.post(f"/v1/workflows/{flow['id']}/runs", headers=headers, json={})
    again = api.http.post(f"/v1/workflows/{flow['id']}/runs", headers=headers, json={})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert len(fleet.claim()) == 1  # one run's tasks, not two
    other = workflow(api, "other", tasks=chain("a"))
    reused = api.http.post(f"/v1/workflows/{other['id']}/runs", headers=headers, json={})
    assert reused.status_code == 409


def test_parameters_reach_every_task_as_environment(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b"), params={"DAY": "2026-11-24", "LIMIT": 10})
    run = start(api, flow["id"], params={"LIMIT": 20})
    assert run["params"] == {"DAY": "2026-11-24", "LIMIT": 20}
    (assignment,) = fleet.held.values() if fleet.claim() else []
    assert assignment["spec"]["env"] == {"DAY": "2026-11-24", "LIMIT": "20"}
    found = problem(api, "POST", f"/v1/workflows/{flow['id']}/runs", 422, params={"LIMT": 1})
    assert fields(found) == ["params.LIMT"]


def test_a_run_keeps_the_version_it_started_with(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b"))
    run = start(api, flow["id"])
    response = api.http.put(
        f"/v1/workflows/{flow['id']}",
        headers={**api.admin, "If-Match": '"1"'},
        json={"name": "flow", "tasks": chain("x")},
    )
    assert response.status_code == 200
    assert response.json()["version"] == 2
    assert response.headers["ETag"] == '"2"'
    stale = api.http.put(
        f"/v1/workflows/{flow['id']}",
        headers={**api.admin, "If-Match": '"1"'},
        json={"name": "flow", "tasks": chain("y")},
    )
    assert stale.status_code == 412
    fleet.claim()
    fleet.end(run_of(api, run["id"], "a"))
    assert states(api, run["id"]) == {"a": "succeeded", "b": "queued"}
    assert states(api, start(api, flow["id"])["id"]) == {"x": "queued"}


def test_cancel_stops_running_tasks_and_cancels_the_rest(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b"))
    run = start(api, flow["id"])
    fleet.claim()
    response = api.http.post(f"/v1/workflow-runs/{run['id']}/cancel", headers=api.admin)
    assert response.status_code == 200
    assert response.json()["state"] == "running"
    assert response.json()["cancel_requested"]
    assert claim(api, fleet.worker_id)["cancel"]  # the worker is told to stop a
    fleet.end(run_of(api, run["id"], "a"), "cancelled")
    ended = detail(api, run["id"])
    assert ended["state"] == "cancelled"
    assert [t["state"] for t in ended["tasks"]] == ["cancelled", "cancelled"]
    assert ended["tasks"][1]["run_id"] is None
    again = api.http.post(f"/v1/workflow-runs/{run['id']}/cancel", headers=api.admin)
    assert again.status_code == 409


def test_repair_runs_the_failed_tasks_again_in_place(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a", "b", "c"))
    run = start(api, flow["id"])
    fleet.claim()
    fleet.end(run_of(api, run["id"], "a"))
    fleet.claim()
    first_b = run_of(api, run["id"], "b")
    fleet.end(first_b, "failed")
    assert detail(api, run["id"])["state"] == "failed"

    path = f"/v1/workflow-runs/{run['id']}/repair"
    repaired = api.http.post(path, headers=api.admin, json={"repair": 0})
    assert repaired.status_code == 200, repaired.text
    assert repaired.json()["repair"] == 1
    assert repaired.json()["state"] == "running"
    raced = api.http.post(path, headers=api.admin, json={"repair": 0})
    assert raced.status_code == 409  # the second repair from the same reading

    assert states(api, run["id"]) == {"a": "succeeded", "b": "queued", "c": "pending"}
    for task in ("b", "c"):
        fleet.claim()
        fleet.end(run_of(api, run["id"], task))
    ended = detail(api, run["id"])
    assert ended["state"] == "succeeded"
    assert [t["repair"] for t in ended["tasks"]] == [0, 1, 1]
    old = api.http.get(f"/v1/runs/{first_b}", headers=api.admin).json()
    assert old["state"] == "failed"  # the first try stays in history


def test_a_running_run_cannot_be_repaired(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"))
    run = start(api, flow["id"])
    problem(api, "POST", f"/v1/workflow-runs/{run['id']}/repair", 409, repair=0)


def test_a_task_maps_over_a_list_and_a_join_waits_for_every_instance(
    api: Api, fleet: Fleet
) -> None:
    flow = workflow(
        api,
        params={"files": ["a.csv", "b.csv", "c.csv"]},
        tasks=[
            {"name": "resize", "job": "work", "map_over": "params.files"},
            {"name": "join", "job": "work", "depends_on": ["resize"]},
        ],
    )
    run = start(api, flow["id"])
    tasks = detail(api, run["id"])["tasks"]
    assert [(t["task"], t["map_index"], t["state"]) for t in tasks] == [
        ("resize", 0, "queued"), ("resize", 1, "queued"), ("resize", 2, "queued"),
        ("join", -1, "pending"),
    ]  # fmt: skip
    taken = sorted(fleet.claim())
    items = sorted(fleet.held[run_id]["spec"]["env"]["files"] for run_id in taken)
    assert items == ['["a.csv", "b.csv", "c.csv"]'] * 3
    for run_id in taken[:2]:
        fleet.end(run_id)
    assert states(api, run["id"])["join"] == "pending"
    fleet.end(taken[2])
    assert states(api, run["id"])["join"] == "queued"


def test_a_task_mapped_over_an_empty_list_is_skipped(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        params={"files": []},
        tasks=[
            {"name": "resize", "job": "work", "map_over": "params.files"},
            {"name": "join", "job": "work", "depends_on": ["resize"]},
        ],
    )
    run = detail(api, start(api, flow["id"])["id"])
    assert [t["state"] for t in run["tasks"]] == ["skipped", "skipped"]
    assert run["tasks"][0]["reason"] == "map_over params.files is an empty list"
    assert run["state"] == "succeeded"


def test_a_map_over_something_not_a_list_fails_the_task_with_why(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        params={"files": "a.csv"},
        tasks=[{"name": "resize", "job": "work", "map_over": "params.files"}],
    )
    run = detail(api, start(api, flow["id"])["id"])
    assert run["tasks"][0]["state"] == "failed"
    assert run["tasks"][0]["reason"] == "map_over params.files is a string, not a list"
    assert run["state"] == "failed"


def test_max_active_runs_queues_the_next_run_until_one_ends(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"), max_active_runs=1)
    first = start(api, flow["id"])
    second = start(api, flow["id"])
    assert (first["state"], second["state"]) == ("running", "queued")
    assert states(api, second["id"]) == {"a": "pending"}
    fleet.claim()
    fleet.end(run_of(api, first["id"], "a"))
    assert detail(api, second["id"])["state"] == "running"
    assert states(api, second["id"]) == {"a": "queued"}


def test_max_active_runs_with_forbid_refuses_the_next_run(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"), max_active_runs=1, concurrency="forbid")
    start(api, flow["id"])
    problem(api, "POST", f"/v1/workflows/{flow['id']}/runs", 409)


def test_a_workflow_with_active_runs_cannot_be_deleted(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=chain("a"))
    run = start(api, flow["id"])
    problem(api, "DELETE", f"/v1/workflows/{flow['id']}", 409)
    api.http.post(f"/v1/workflow-runs/{run['id']}/cancel", headers=api.admin)
    assert api.http.delete(f"/v1/workflows/{flow['id']}", headers=api.admin).status_code == 204
    assert detail(api, run["id"])["state"] == "cancelled"  # history outlives the definition


def test_a_job_a_workflow_runs_cannot_be_deleted_or_renamed(api: Api, fleet: Fleet) -> None:
    workflow(api, tasks=chain("a"))
    (work,) = api.http.get("/v1/jobs", headers=api.admin, params={"name": "work"}).json()["items"]
    deleted = problem(api, "DELETE", f"/v1/jobs/{work['id']}", 409)
    assert "workflow(s) flow" in deleted["detail"]
    problem(api, "PATCH", f"/v1/jobs/{work['id']}", 409, name="renamed")
    assert problem(api, "PATCH", f"/v1/jobs/{work['id']}", 200, timeout_seconds=60)


def test_children_get_their_parents_outputs_and_map_over_them(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        tasks=[
            {"name": "split", "job": "work"},
            {"name": "each", "job": "work", "depends_on": ["split"], "map_over": "split.parts"},
            {"name": "join", "job": "work", "depends_on": ["each", "split"]},
        ],
    )
    run = start(api, flow["id"])
    (split,) = fleet.claim()
    fleet.end(split, output={"parts": ["x", "y"], "rows": 2})
    each = sorted(fleet.claim(), key=lambda r: fleet.held[r]["task"]["map_index"])
    tasks = [fleet.held[run_id]["task"] for run_id in each]
    assert [(t["task_name"], t["map_index"], t["map_item"]) for t in tasks] == [
        ("each", 0, "x"), ("each", 1, "y"),
    ]  # fmt: skip
    assert tasks[0]["inputs"] == {"split": {"parts": ["x", "y"], "rows": 2}}
    assert tasks[0]["workflow_run_id"] == run["id"]
    fleet.end(each[1], output={"n": 1})
    fleet.end(each[0], output={"n": 0})
    (join,) = fleet.claim()
    assert fleet.held[join]["task"]["inputs"] == {
        "each": [{"n": 0}, {"n": 1}], "split": {"parts": ["x", "y"], "rows": 2},
    }  # fmt: skip
    outputs = {t["task"]: t["output"] for t in detail(api, run["id"])["tasks"]}
    assert outputs["split"] == {"parts": ["x", "y"], "rows": 2}


def test_a_map_over_an_output_without_the_key_fails_with_why(api: Api, fleet: Fleet) -> None:
    flow = workflow(
        api,
        tasks=[
            {"name": "split", "job": "work"},
            {"name": "each", "job": "work", "depends_on": ["split"], "map_over": "split.parts"},
        ],
    )
    run = start(api, flow["id"])
    (split,) = fleet.claim()
    fleet.end(split, output={"rows": 2})
    each = next(t for t in detail(api, run["id"])["tasks"] if t["task"] == "each")
    assert (each["state"], each["reason"]) == (
        "failed",
        "map_over split.parts: there is no key 'parts'",
    )
    assert detail(api, run["id"])["state"] == "failed"


def test_the_walk_counts_the_runs_it_would_read_whole(api: Api, fleet: Fleet) -> None:
    """The walk reads a workflow run's runs counted by task, repair and state (a fan-out's
    thousand instances are a few counts at each end): the counts are the whole read's."""
    flow = workflow(
        api,
        params={"files": ["a", "b", "c", "d"]},
        tasks=[
            {"name": "resize", "job": "work", "map_over": "params.files"},
            {"name": "join", "job": "work", "depends_on": ["resize"]},
        ],
    )
    run = start(api, flow["id"])
    taken = sorted(fleet.claim())
    fleet.end(taken[1])
    fleet.end(taken[3], "failed")
    with api.store.database.read() as connection:
        counted = tallies_of(connection, run["id"])
        whole = connection.execute(
            select(runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.state).where(
                runs.c.workflow_run_id == run["id"]
            )
        ).all()
    facts = [TaskRunFact(r.task_name, r.map_index, r.repair, RunState(r.state)) for r in whole]
    assert sorted(counted) == sorted(tally(facts))
    assert sorted((t.task_name, t.state, t.number) for t in counted) == [
        ("join", RunState.UPSTREAM_FAILED, 1),  # at the first failure: all_success
        ("resize", RunState.FAILED, 1), ("resize", RunState.RUNNING, 2),
        ("resize", RunState.SUCCEEDED, 1),
    ]  # fmt: skip
