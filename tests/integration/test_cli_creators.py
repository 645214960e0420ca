"""``--created-by me|ACTOR`` on ``herder job|schedule|workflow|run list``, and the creator a
``show`` prints, against the in-process API on both stores."""

from __future__ import annotations

import json

import pytest
from typer.testing import Result

from herder.client import ApiError
from herder.domain.models import Role
from herder.store.history import listing
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def ids(result: Result) -> list[str]:
    return ok(result).split()


def test_the_lists_keep_what_me_or_an_actor_made_and_show_names_the_creator(
    api: Api, herder: Herder
) -> None:
    key, token = api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "deployer")
    actor = f"user:{key.id}"
    job = api.http.post(
        "/v1/jobs", headers=api.as_key(token),
        json={"name": "mine", "runtime": "shell", "command": "true"},
    ).json()  # fmt: skip
    api.create_job("theirs")
    as_deployer = api.as_key(token)
    for path, body in (
        ("/v1/schedules", {"job_id": job["id"], "cron": "0 3 * * *"}),
        ("/v1/workflows", {"name": "flow", "tasks": [{"name": "a", "job": "mine"}]}),
    ):
        assert api.http.post(path, headers=as_deployer, json=body).status_code == 201
    run = ids(herder("run", "start", "mine", "-q", key=token))

    assert ids(herder("job", "list", "--created-by", "me", "-q", key=token)) == [job["id"]]
    assert ids(herder("job", "list", "--created-by", actor, "-q")) == [job["id"]]
    assert ids(herder("run", "list", "--created-by", "me", "-q", key=token)) == run
    assert ids(herder("run", "list", "--created-by", "me", "-q")) == []
    assert len(ids(herder("schedule", "list", "--created-by", "me", "-q", key=token))) == 1
    assert ids(herder("schedule", "list", "--created-by", "me", "-q")) == []
    assert len(ids(herder("workflow", "list", "--created-by", actor, "-q"))) == 1

    for shown in (
        ok(herder("job", "show", "mine")),
        ok(herder("run", "show", run[0])),
        ok(herder("workflow", "show", "flow")),
    ):
        assert "deployer" in shown  # a person by name, as run events name them
        assert actor not in shown
    assert json.loads(ok(herder("job", "show", "mine", "--json")))["created_by"] == actor

    refused = herder("job", "list", "--created-by", "nobody at all")
    assert isinstance(refused.exception, ApiError)
    assert (refused.exception.status, refused.exception.field) == (422, "created_by")


def test_run_list_by_creator_follows_short_pages_until_full(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "CREATOR_SCAN_ROWS", 3)  # each page reads 3 runs
    _, token = api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "rare")
    api.create_job("build")
    mine = [ids(herder("run", "start", "build", "-q", key=token))[0]]
    for _ in range(7):
        ids(herder("run", "start", "build", "-q"))
    mine.append(ids(herder("run", "start", "build", "-q", key=token))[0])
    listed = ids(herder("run", "list", "--created-by", "me", "-q", key=token))
    assert listed == mine[::-1]  # both, across the short pages between them
