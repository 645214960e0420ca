"""Job parameters, and who may choose what a run executes (issue 22, item 1), on both stores.

The attack: an operator key started a run of a Python job that uses a secret with
``PYTHONWARNINGS=ignore::antigravity.x`` and ``BROWSER=<shell command>``; Python's start-up
imported ``antigravity``, which ran the command beside the secret. Now an operator sets only
a job's declared parameters; raw ``env`` and ``args`` need a developer; and no role may
override a variable that changes how a program starts, or a secret's variable.
"""

from __future__ import annotations

from typing import Any

import pytest

from herder.domain.models import Role
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_secrets import claim

ATTACK_ENV = {
    "PYTHONWARNINGS": "ignore::antigravity.x",
    "BROWSER": "/bin/sh -c 'id; echo $API_TOKEN' #%s",
}
PARAMETERS = [
    {"name": "REGION", "enum": ["eu", "us"], "default": "eu"},
    {"name": "COUNT", "type": "integer", "default": 1},
    {"name": "RATIO", "type": "number", "default": 0.5},
    {"name": "DRY_RUN", "type": "boolean", "default": False},
    {"name": "DAY", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}"},  # required: no default
]


def key(api: Api, role: Role) -> dict[str, str]:
    return api.as_key(api.store.access.create_api_key(api.tenant_id, role, str(role))[1])


def python_job_with_a_secret(api: Api, **spec: Any) -> dict[str, Any]:
    put = api.http.put("/v1/secrets/API_TOKEN", headers=api.admin, json={"value": "t0ken"})
    assert put.status_code == 201, put.text
    upload = api.http.post(
        "/v1/artifacts",
        headers=api.admin,
        files={"file": ("job.py", b"import os\nprint(len(os.environ))\n", "text/x-python")},
    )
    assert upload.status_code == 201, upload.text
    body = {
        "name": "uses-token",
        "runtime": "python",
        "artifact": upload.json()["id"],
        "secrets": {"API_TOKEN": "API_TOKEN"},
        **spec,
    }
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def no_runs(api: Api) -> None:
    listing = api.http.get("/v1/runs", headers=api.admin)
    assert listing.status_code == 200, listing.text
    assert listing.json()["items"] == []


def fields(response: Any) -> list[str]:
    return [error["field"] for error in response.json().get("errors", [])] or [
        response.json().get("field")
    ]


def test_the_operators_attack_is_refused_and_stores_nothing(api: Api) -> None:
    job = python_job_with_a_secret(api)
    operator = key(api, Role.OPERATOR)
    started = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=operator, json={"env": ATTACK_ENV}
    )
    assert started.status_code == 403, started.text
    assert started.headers["content-type"] == "application/problem+json"
    assert started.json()["field"] == "env"
    assert "developer" in started.json()["detail"]
    batch = api.http.post(
        "/v1/runs/batch",
        headers=operator,
        json={"runs": [{"job_id": job["id"]}, {"job_id": job["id"], "args": ["x"]}]},
    )
    assert batch.status_code == 403, batch.text
    assert batch.json()["field"] == "runs.1.args"
    no_runs(api)


@pytest.mark.parametrize("role", [Role.DEVELOPER, Role.ADMIN])
def test_no_role_may_override_a_startup_variable_or_a_secrets_variable(
    api: Api, role: Role
) -> None:
    job = python_job_with_a_secret(api)
    caller = key(api, role)
    for env, field in [
        (ATTACK_ENV, "env.PYTHONWARNINGS"),
        ({"LD_PRELOAD": "/tmp/x.so"}, "env.LD_PRELOAD"),
        ({"ld_preload": "/tmp/x.so"}, "env.ld_preload"),
        ({"BASH_ENV": "/tmp/x"}, "env.BASH_ENV"),
        ({"NODE_OPTIONS": "--require /tmp/x"}, "env.NODE_OPTIONS"),
        ({"API_TOKEN": "mine"}, "env.API_TOKEN"),
    ]:
        response = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=caller, json={"env": env})
        assert response.status_code == 422, response.text
        assert field in fields(response), response.text
        batch = api.http.post(
            "/v1/runs/batch", headers=caller, json={"runs": [{"job_id": job["id"], "env": env}]}
        )
        assert batch.status_code == 200, batch.text
        [answer] = batch.json()["items"]
        assert (answer["status"], answer["field"]) == (422, f"runs.0.{field}"), answer
    no_runs(api)
    allowed = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=caller, json={"env": {"VERBOSE": "1"}}
    )
    assert allowed.status_code == 201, allowed.text


def test_a_job_that_sets_a_startup_variable_itself_may_have_it_overridden_by_a_developer(
    api: Api,
) -> None:
    job = api.create_job("lib", env={"LD_LIBRARY_PATH": "/opt/lib"})
    run = api.start_run(job["id"], env={"LD_LIBRARY_PATH": "/opt/lib2"})
    assert run["spec"]["env"] == {"LD_LIBRARY_PATH": "/opt/lib2"}


def test_an_operator_starts_with_declared_parameters_checked_and_defaults_filled(
    api: Api,
) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    operator = key(api, Role.OPERATOR)
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs",
        headers=operator,
        json={"params": {"REGION": "us", "COUNT": "3", "DAY": "2026-11-27"}},
    )
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["env"] == {
        "REGION": "us", "COUNT": "3", "RATIO": "0.5", "DRY_RUN": "false", "DAY": "2026-11-27",
    }  # fmt: skip
    assert response.json()["spec"]["parameters"] == []  # a run holds values, not declarations


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "params.DAY"),  # required
        ({"DAY": "2026-11-27", "NOPE": "1"}, "params.NOPE"),
        ({"DAY": "27/11/2026"}, "params.DAY"),  # pattern, matched whole
        ({"DAY": "2026-11-27\nx"}, "params.DAY"),
        ({"DAY": "2026-11-27", "REGION": "mars"}, "params.REGION"),
        ({"DAY": "2026-11-27", "COUNT": True}, "params.COUNT"),  # a boolean is no integer
        ({"DAY": "2026-11-27", "COUNT": 1.5}, "params.COUNT"),
        ({"DAY": "2026-11-27", "COUNT": 2**70}, "params.COUNT"),
        ({"DAY": "2026-11-27", "COUNT": [1]}, "params.COUNT"),
        ({"DAY": "2026-11-27", "RATIO": "NaN"}, "params.RATIO"),
        ({"DAY": "2026-11-27", "DRY_RUN": 1}, "params.DRY_RUN"),
        ({"DAY": "2026-11-27", "DRY_RUN": "yes"}, "params.DRY_RUN"),
        ({"DAY": 20261127}, "params.DAY"),  # a number is no string
        ({"DAY": "2" * 100_000}, "params.DAY"),
    ],
)
def test_a_parameter_that_does_not_fit_is_422_naming_it_and_stores_nothing(
    api: Api, params: dict[str, Any], field: str
) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    operator = key(api, Role.OPERATOR)
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=operator, json={"params": params}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert field in fields(response), response.text
    no_runs(api)


def test_a_developer_may_not_set_a_parameter_through_env(api: Api) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs",
        headers=api.admin,
        json={"params": {"DAY": "2026-11-27"}, "env": {"REGION": "mars"}},
    )
    assert response.status_code == 422, response.text
    assert fields(response) == ["env.REGION"]


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ([{"name": "1BAD"}], "parameters.0.name"),
        ([{"name": "HERDER_RUN_ID", "default": "x"}], "parameters.0.name"),
        ([{"name": "A", "default": "x"}, {"name": "A", "default": "y"}], "parameters.1.name"),
        ([{"name": "PLAIN", "default": "x"}], "parameters.0.name"),  # set by env
        ([{"name": "TOKEN", "default": "x"}], "parameters.0.name"),  # a secret's variable
        ([{"name": "PYTHONPATH", "default": "/x"}], "parameters.0.name"),  # unconstrained
        ([{"name": "A", "pattern": "(a"}], "parameters.0.pattern"),
        ([{"name": "A", "pattern": "(\\w)\\1"}], "parameters.0.pattern"),  # not RE2
        ([{"name": "A", "pattern": "a" * 257}], "parameters.0.pattern"),
        ([{"name": "A", "type": "integer", "pattern": "[0-9]+"}], "parameters.0.pattern"),
        ([{"name": "A", "type": "integer", "default": True}], "parameters.0.default"),
        ([{"name": "A", "type": "integer", "default": "x"}], "parameters.0.default"),
        ([{"name": "A", "type": "boolean", "default": 0}], "parameters.0.default"),
        ([{"name": "A", "enum": ["a", "b"], "default": "c"}], "parameters.0.default"),
        ([{"name": "A", "pattern": "[a-z]+", "default": "A"}], "parameters.0.default"),
        ([{"name": "A", "type": "integer", "enum": [1, "x"]}], "parameters.0.enum"),
        ([{"name": "A", "enum": ["a", "a"]}], "parameters.0.enum"),
        ([{"name": "A", "enum": []}], "parameters.0.enum"),
        ([{"name": "A", "type": "date"}], "parameters.0.type"),
        ([{"name": "A", "required": True}], "parameters.0.required"),
        ([{"name": f"P{index}"} for index in range(101)], "parameters"),
        ([{"name": "A", "default": "x" * 4097}], "parameters.0.default"),
    ],
)
def test_a_declaration_that_breaks_a_rule_is_422_naming_the_field_and_stores_nothing(
    api: Api, parameters: list[dict[str, Any]], field: str
) -> None:
    assert api.http.put("/v1/secrets/T", headers=api.admin, json={"value": "v"}).status_code == 201
    body = {
        "name": "declares",
        "runtime": "shell",
        "command": "true",
        "env": {"PLAIN": "1"},
        "secrets": {"TOKEN": "T"},
        "parameters": parameters,
    }
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert field in fields(response), response.text
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []
    job = api.create_job("declares", env={"PLAIN": "1"}, secrets={"TOKEN": "T"})
    patch = api.http.patch(
        f"/v1/jobs/{job['id']}", headers=api.admin, json={"parameters": parameters}
    )
    assert patch.status_code == 422, patch.text
    assert (
        api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).json()["spec"]["parameters"] == []
    )


def test_thousands_of_params_are_refused_quickly_naming_the_first_unknown(api: Api) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    params = {f"P{index}": "x" for index in range(5000)}
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=api.admin, json={"params": params}
    )
    assert response.status_code == 422, response.text
    assert fields(response) == ["params.P0"]
    no_runs(api)


def test_a_hostile_pattern_cannot_stall_the_server(api: Api) -> None:
    """RE2 matches in linear time: ``(a+)+$`` against 4,000 a's and a b answers at once."""
    job = api.create_job("redos", parameters=[{"name": "A", "pattern": "(a+)+", "default": "a"}])
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=api.admin, json={"params": {"A": "a" * 4000 + "b"}}
    )
    assert response.status_code == 422, response.text


def test_the_parameters_reach_the_claim_as_environment(api: Api) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    worker_id = register_worker(api)
    api.start_run(job["id"], params={"DAY": "2026-11-27", "DRY_RUN": True})
    [assignment] = claim(api, worker_id)
    assert assignment["spec"]["env"]["DAY"] == "2026-11-27"
    assert assignment["spec"]["env"]["DRY_RUN"] == "true"


def test_a_rerun_keeps_the_values_it_ran_with(api: Api) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    operator = key(api, Role.OPERATOR)
    run = api.start_run(job["id"], params={"DAY": "2026-11-27", "REGION": "us"})
    api.http.post(f"/v1/runs/{run['id']}/cancel", headers=operator)
    again = api.http.post(f"/v1/runs/{run['id']}/rerun", headers=operator)
    assert again.status_code == 201, again.text
    assert again.json()["spec"]["env"]["REGION"] == "us"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"params": {"DAY": "2026-11-27\u0000"}}, "params.DAY"),
        ({"params": {"DAY\u0000": "2026-11-27"}}, "params"),
    ],
)
def test_a_nul_in_a_parameter_is_422_and_stores_nothing(
    api: Api, body: dict[str, Any], field: str
) -> None:
    job = api.create_job("params", parameters=PARAMETERS)
    response = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert fields(response)[0].startswith(field), response.text
    no_runs(api)
    declared = api.http.post(
        "/v1/jobs",
        headers=api.admin,
        json={"name": "nul", "runtime": "shell", "command": "true",
              "parameters": [{"name": "A", "pattern": "a\u0000"}]},
    )  # fmt: skip
    assert declared.status_code == 422, declared.text
    assert fields(declared) == ["parameters.0.pattern"]
