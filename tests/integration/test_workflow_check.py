"""``POST /v1/workflows/check``: a workflow's YAML checked as creating it would check it, each
problem at its line, the graph of what parsed, nothing saved; and ``GET
/v1/workflows/{id}/source``, the workflow as that YAML. Hostile text gets a clear answer in
bounded time, never a 500."""

from __future__ import annotations

import time
from typing import Any

import pytest

from herder.definitions.workflow_text import MAX_TEXT_BYTES
from herder.domain.models import Role
from tests.integration.conftest import Api

TWO_TASKS = """\
name: nightly
tasks:
  - name: extract
    job: work
  - name: load
    job: work
    depends_on: [extract]
"""


def check(api: Api, text: str, **more: Any) -> dict[str, Any]:
    response = api.http.post("/v1/workflows/check", headers=api.admin, json={"yaml": text, **more})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def problems(answer: dict[str, Any]) -> list[tuple[int, str]]:
    return [(problem["line"], problem["path"]) for problem in answer["problems"]]


def test_a_valid_workflow_is_drawn_and_given_back_as_the_body_to_save(api: Api) -> None:
    api.create_job("work")
    answer = check(api, TWO_TASKS)
    assert answer["valid"] is True
    assert answer["problems"] == []
    graph = answer["graph"]
    assert [(task["name"], task["kind"], task["job"], task["line"]) for task in graph["tasks"]] == [
        ("extract", "job", "work", 3),
        ("load", "job", "work", 5),
    ]
    assert graph["edges"] == [["extract", "load"]]
    assert graph["cycle"] == []
    saved = api.http.post("/v1/workflows", headers=api.admin, json=answer["workflow"])
    assert saved.status_code == 201, saved.text
    assert api.http.get("/v1/workflows", headers=api.admin).json()["items"][0]["name"] == "nightly"


def test_nothing_is_saved_and_a_taken_name_is_a_problem_but_for_the_workflow_edited(
    api: Api,
) -> None:
    api.create_job("work")
    check(api, TWO_TASKS)
    assert api.http.get("/v1/workflows", headers=api.admin).json()["items"] == []
    workflow = api.http.post(
        "/v1/workflows", headers=api.admin, json=check(api, TWO_TASKS)["workflow"]
    ).json()
    taken = check(api, TWO_TASKS)
    assert taken["valid"] is False
    assert problems(taken) == [(1, "name")]
    assert "already exists" in taken["problems"][0]["message"]
    assert check(api, TWO_TASKS, workflow_id=workflow["id"])["valid"] is True


def test_every_missing_job_and_dependency_is_named_at_its_line(api: Api) -> None:
    api.create_job("work")
    text = """\
name: flow
tasks:
  - name: a
    job: missing-one
  - name: b
    job: work
    depends_on: [a, ghost]
  - name: c
    job: missing-two
    depends_on: [phantom]
"""
    answer = check(api, text)
    assert answer["valid"] is False
    assert answer["workflow"] is None
    assert problems(answer) == [(7, "tasks.1.depends_on"), (10, "tasks.2.depends_on")]
    assert "'ghost'" in answer["problems"][0]["message"]
    # with the dependencies fixed, the store's checks name each missing job
    fixed = text.replace("[a, ghost]", "[a]").replace("[phantom]", "[b]")
    answer = check(api, fixed)
    assert problems(answer) == [(4, "tasks.0.job"), (9, "tasks.2.job")]
    assert "missing-two" in answer["problems"][1]["message"]
    assert [edge for edge in answer["graph"]["edges"]] == [["a", "b"], ["b", "c"]]


def test_a_cycle_is_named_and_its_tasks_drawn(api: Api) -> None:
    api.create_job("work")
    text = TWO_TASKS.replace(
        "    job: work\n  - name: load", "    job: work\n    depends_on: [load]\n  - name: load"
    )
    answer = check(api, text)
    assert answer["valid"] is False
    [problem] = answer["problems"]
    assert "cycle" in problem["message"]
    assert problem["path"].endswith("depends_on")
    assert problem["line"] in (5, 8)
    assert answer["graph"]["cycle"] == ["extract", "load"]
    assert answer["graph"]["edges"] == [["load", "extract"], ["extract", "load"]]


def test_a_yaml_syntax_error_is_at_its_line(api: Api) -> None:
    answer = check(api, "name: x\ntasks:\n  - name: a\n    job: [work\n")
    assert answer["valid"] is False
    [problem] = answer["problems"]
    assert problem["message"].startswith("YAML syntax")
    assert problem["line"] >= 4


@pytest.mark.parametrize(
    ("text", "line", "path", "said"),
    [
        ("name: x\ntasks: []\n", 2, "tasks", "at least 1"),
        (
            "name: '<img src=x onerror=alert(1)>'\ntasks:\n  - {name: a, job: w}\n",
            1,
            "name",
            "letters",
        ),
        ("name: x\ntasks:\n  - name: a\n", 3, "tasks.0", "exactly one of job"),
        ("name: x\ntasks:\n  - {name: a, job: w, colour: red}\n", 3, "tasks.0.colour", "Extra"),
        ("name: x\nparams: {a: .inf}\ntasks:\n  - {name: a, job: w}\n", 2, "params.a", "finite"),
        ("workflows:\n  - name: x\n", 1, "workflows", "one workflow"),
        ("- a\n- b\n", 1, "", "mapping"),
        (
            "name: x\ntasks:\n  - {name: a, job: w}\n  - {name: a, job: w}\n",
            4,
            "tasks.1.name",
            "two tasks",
        ),
        ("when: 2001-02-30\n", 1, "", "cannot be read"),
        ("name: x\nname: y\n", 2, "", "twice"),
    ],
)
def test_each_refusal_is_said_at_its_line(
    api: Api, text: str, line: int, path: str, said: str
) -> None:
    api.create_job("w")
    answer = check(api, text)
    assert answer["valid"] is False
    first = answer["problems"][0]
    assert (first["line"], first["path"]) == (line, path), answer["problems"]
    assert said in first["message"]


def test_the_source_is_the_workflow_as_yaml_with_its_etag(api: Api) -> None:
    api.create_job("work")
    created = api.http.post(
        "/v1/workflows", headers=api.admin, json=check(api, TWO_TASKS)["workflow"]
    ).json()
    source = api.http.get(f"/v1/workflows/{created['id']}/source", headers=api.admin)
    assert source.status_code == 200
    assert source.headers["ETag"] == '"1"'
    assert source.json()["yaml"] == (
        "name: nightly\ntasks:\n- name: extract\n  job: work\n- name: load\n  job: work\n"
        "  depends_on:\n  - extract\n"
    )
    answer = check(api, source.json()["yaml"], workflow_id=created["id"])
    assert answer["valid"] is True
    assert {key: answer["workflow"][key] for key in ("name", "tasks")} == {
        key: created[key] for key in ("name", "tasks")
    }


def test_a_viewer_or_operator_may_not_check(api: Api) -> None:
    for role in (Role.VIEWER, Role.OPERATOR):
        key = api.store.access.create_api_key(api.tenant_id, role, str(role))[1]
        response = api.http.post(
            "/v1/workflows/check", headers=api.as_key(key), json={"yaml": TWO_TASKS}
        )
        assert response.status_code == 403


# --- attacks: a clear answer in bounded time, never a 500 ---


def test_text_past_the_limit_is_413(api: Api) -> None:
    text = "name: x\n" + "#" * MAX_TEXT_BYTES
    response = api.http.post("/v1/workflows/check", headers=api.admin, json={"yaml": text})
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert "at most" in response.json()["detail"]


def test_nul_and_non_utf8_are_refused_naming_where(api: Api) -> None:
    nul = api.http.post("/v1/workflows/check", headers=api.admin, json={"yaml": "name: x\x00\n"})
    assert nul.status_code == 422
    assert "NUL" in nul.json()["detail"]
    raw = b'{"yaml": "name: \xff\xfe"}'
    bad = api.http.post(
        "/v1/workflows/check",
        headers={**api.admin, "Content-Type": "application/json"},
        content=raw,
    )
    assert bad.status_code in (400, 422), bad.text


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "billion laughs",
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n"
                for i in range(8)
            ),
            "aliases expand",
        ),
        ("deep nesting", "a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        ("self alias", "a: &x [*x]\n", "aliases expand"),
    ],
)
def test_hostile_yaml_is_a_problem_not_a_crash(api: Api, name: str, text: str, said: str) -> None:
    started = time.monotonic()
    answer = check(api, text)
    assert time.monotonic() - started < 10, name
    assert answer["valid"] is False
    assert said in answer["problems"][0]["message"], answer["problems"]


def test_ten_thousand_tasks_are_refused_in_bounded_time(api: Api) -> None:
    tasks = ", ".join(f"{{name: t{i}, job: w}}" for i in range(10_000))
    text = f"name: huge\ntasks: [{tasks}]\n"
    assert len(text.encode()) <= MAX_TEXT_BYTES
    started = time.monotonic()
    answer = check(api, text)
    assert time.monotonic() - started < 20
    assert answer["valid"] is False
    assert problems(answer)[0] == (2, "tasks")
    assert "at most 1000" in answer["problems"][0]["message"]
    assert answer["graph"]["tasks"] == []  # past what a workflow may have: not drawn
