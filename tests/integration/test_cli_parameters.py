"""Parameters from the command line (issue 41, item 7): ``job create`` and ``job update``
declare them (``--param-spec``, ``--param-enum``, ``--param-pattern``), checked by the
domain's own declaration before anything is sent; ``schedule create --param`` gives their
values to every run a schedule starts."""

from __future__ import annotations

import json

from typer.testing import Result

from herder.client import ApiError
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


DECLARED = (
    "--param-spec", "dataset=daily",
    "--param-spec", "mode:string=fast", "--param-enum", "mode=fast,full",
    "--param-spec", "day", "--param-pattern", "day=^[0-9]{8}$",
    "--param-spec", "limit:integer=5",
    "--param-spec", "dry_run:boolean=false",
)  # fmt: skip


def test_a_job_declares_its_parameters_and_a_run_is_checked_against_them(
    herder: Herder,
) -> None:
    created = json.loads(
        ok(herder("job", "create", "etl", "--command", "true", *DECLARED, "--json"))
    )
    assert created["spec"]["parameters"] == [
        {"name": "dataset", "type": "string", "description": "", "pattern": None, "enum": None,
         "default": "daily"},
        {"name": "mode", "type": "string", "description": "", "pattern": None,
         "enum": ["fast", "full"], "default": "fast"},
        {"name": "day", "type": "string", "description": "", "pattern": "^[0-9]{8}$",
         "enum": None, "default": None},
        {"name": "limit", "type": "integer", "description": "", "pattern": None, "enum": None,
         "default": 5},
        {"name": "dry_run", "type": "boolean", "description": "", "pattern": None, "enum": None,
         "default": False},
    ]  # fmt: skip
    ok(herder("run", "start", "etl", "--param", "day=20261206", "--param", "mode=full"))
    refused = herder("run", "start", "etl", "--param", "day=yesterday")
    assert isinstance(refused.exception, ApiError)
    assert "does not match the pattern" in str(refused.exception)


def test_a_refused_declaration_names_its_option_and_creates_nothing(
    api: Api, herder: Herder
) -> None:
    cases = {
        ("--param-spec", "limit:integer=many"): ("--param-spec", "limit: expected an integer"),
        ("--param-spec", "limit:int"): ("--param-spec", "type 'int' is none of string"),
        ("--param-spec", "mode=slow", "--param-enum", "mode=fast,full"): (
            "--param-spec", "the default 'slow' is not one of enum"
        ),
        ("--param-spec", "day", "--param-pattern", "day=(["): (
            "--param-pattern", "not a valid RE2 expression"
        ),
        ("--param-enum", "mode=fast"): ("--param-enum", "mode is not declared"),
        ("--param-spec", "PATH"): ("--param-spec", "declare it with an enum or a pattern"),
    }  # fmt: skip
    for options, (option, words) in cases.items():
        refused = herder("job", "create", "etl", "--command", "true", *options)
        assert refused.exit_code == 2, (options, refused.output)
        said = " ".join(refused.output.replace("│", " ").split())
        assert option in said, (options, said)
        assert words in said, (options, said)
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []


def test_job_update_replaces_the_declared_parameters(herder: Herder) -> None:
    ok(herder("job", "create", "etl", "--command", "true", *DECLARED))
    updated = herder(
        "job", "update", "etl", "--param-spec", "mode=fast", "--param-enum", "mode=fast,full,dry",
        "--json",
    )  # fmt: skip
    parameters = json.loads(ok(updated))["spec"]["parameters"]
    assert [(item["name"], item["enum"]) for item in parameters] == [
        ("mode", ["fast", "full", "dry"])
    ]


def test_a_schedule_gives_parameter_values_to_its_runs_checked_when_saved(
    herder: Herder,
) -> None:
    ok(herder("job", "create", "etl", "--command", "true", *DECLARED))
    created = herder(
        "schedule", "create", "etl", "0 3 * * *", "--param", "day=20261206",
        "--param", "limit=9", "--json",
    )  # fmt: skip
    overrides = json.loads(ok(created))["spec"]["overrides"]
    assert overrides["params"] == {"day": "20261206", "limit": "9"}
    refused = herder(
        "schedule", "create", "etl", "0 3 * * *", "--param", "day=20261206",
        "--param", "limit=many",
    )  # fmt: skip
    assert isinstance(refused.exception, ApiError)
    assert "parameter limit: expected an integer" in str(refused.exception)
