"""``herder run …`` against the in-process API on both stores: runs named by the start of
their id, and ``--wait`` telling scripts how the run ended."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import Result

from herder.client import ApiError, HerderClient
from herder.domain.models import Role, RunDetail
from tests.integration.conftest import Api, Herder
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, log, report
from tests.integration.test_workflows import Fleet, job


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def batch(api: Api, job_id: object, count: int) -> list[str]:
    """Runs made in one unit of work, so their ids share the creation time's 14 characters."""
    response = api.http.post(
        "/v1/runs/batch", headers=api.admin, json={"runs": [{"job_id": job_id}] * count}
    )
    assert response.status_code == 200, response.text
    return [item["run_id"] for item in response.json()["items"]]


def shared_start(one: str, other: str) -> str:
    length = next((i for i, pair in enumerate(zip(one, other, strict=True)) if len(set(pair)) > 1))
    return one[:length]


def unique_prefix(run_id: str, other: str) -> str:
    """The shortest start of ``run_id`` that ``other`` does not share."""
    return run_id[: len(shared_start(run_id, other)) + 1]


def prefix_ids(api: Api, prefix: str, key: str | None = None) -> list[str]:
    headers = api.as_key(key) if key else api.admin
    response = api.http.get("/v1/runs", headers=headers, params={"id_prefix": prefix})
    assert response.status_code == 200, response.text
    return [run["id"] for run in response.json()["items"]]


def test_runs_are_listed_by_the_start_of_their_id(api: Api) -> None:
    first, second = batch(api, api.create_job()["id"], 2)
    shared = shared_start(first, second)
    assert len(shared) >= len("run_") + 10
    assert prefix_ids(api, shared) == sorted([first, second], reverse=True)  # newest first
    assert prefix_ids(api, unique_prefix(first, second)) == [first]
    assert prefix_ids(api, first) == [first]
    assert prefix_ids(api, "run_ZZZZZZZZ") == []


def test_another_tenants_runs_are_not_found_by_prefix(api: Api) -> None:
    (run_id,) = batch(api, api.create_job()["id"], 1)
    other = api.other_tenant_key("team-b")
    assert prefix_ids(api, run_id[:14], key=other) == []
    assert prefix_ids(api, run_id, key=other) == []


@pytest.mark.parametrize(
    "prefix",
    [
        "run_",  # nothing after it
        "run_%",  # LIKE's wildcards match only themselves, and no id holds them
        "run__",
        "run_01M8%",
        "job_01M82Z",
        "01M82ZABCD",
        "run_01m82z",  # ids are upper case
        "run_01M82ZIO",  # not Crockford base32
        "run_" + "0" * 27,  # longer than an id
        "run_" + "0" * 10_000,
        "run_01M82Z\x00",
        "run_01M82Z' OR 1=1 --",
    ],
)
def test_a_malformed_id_prefix_is_refused_naming_the_field(api: Api, prefix: str) -> None:
    response = api.http.get("/v1/runs", headers=api.admin, params={"id_prefix": prefix})
    assert response.status_code == 422, response.text
    assert [error["field"] for error in response.json()["errors"]] == ["id_prefix"]


def test_run_commands_take_a_unique_start_of_the_id(api: Api, herder: Herder) -> None:
    first, second = batch(api, api.create_job(retry={"max_attempts": 1})["id"], 2)
    short = unique_prefix(first, second)
    cut = max(short, first[:16]) + "…"  # as a table cut to 80 columns shows it
    assert json.loads(ok(herder("run", "show", short, "--json")))["id"] == first
    assert json.loads(ok(herder("run", "show", cut, "--json")))["id"] == first
    lower = "run_" + short.removeprefix("run_").lower()
    assert json.loads(ok(herder("run", "show", lower, "--json")))["id"] == first
    assert ok(herder("run", "logs", short)) == ""
    cancelled = json.loads(ok(herder("run", "cancel", short, "--json")))
    assert (cancelled["id"], cancelled["state"]) == (first, "cancelled")
    assert first in ok(herder("run", "rerun", short))
    assert json.loads(ok(herder("run", "show", second, "--json")))["state"] == "queued"


def test_an_ambiguous_unknown_or_short_prefix_is_explained(api: Api, herder: Herder) -> None:
    first, second = batch(api, api.create_job()["id"], 2)
    shared = shared_start(first, second)
    ambiguous = herder("run", "show", shared)
    assert ambiguous.exit_code == 1
    newer, older = sorted([first, second], reverse=True)
    said = " ".join(ambiguous.output.split())  # the error console wraps at 80 columns
    assert f"{shared} is ambiguous: {newer}, {older} (give more characters)" in said
    unknown = herder("run", "cancel", "run_ZZZZZZZZ")
    assert unknown.exit_code == 1
    assert "no run starts with run_ZZZZZZZZ" in unknown.output
    short = herder("run", "logs", first[:11])
    assert short.exit_code == 1
    assert f"no run {first[:11]}: give 8 characters after run_ or more" in short.output
    not_an_id = herder("run", "show", "run_missing")  # the server's answer, as before
    assert not_an_id.exit_code == 1
    assert "not found" in str(not_an_id.exception)
    other = api.other_tenant_key("team-b")
    hidden = herder("run", "show", first[:14], key=other)
    assert hidden.exit_code == 1
    assert "no run starts with" in hidden.output


@pytest.fixture
def ending(api: Api, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A worker that ends each run as the test says (``ending[job name]``) as soon as the
    CLI starts waiting for it."""
    fleet = Fleet(api)
    outcomes: dict[str, str] = {}
    wait = HerderClient.wait

    def end_then_wait(self: HerderClient, run_id: str, **options: Any) -> RunDetail:
        fleet.claim()
        if run_id in fleet.held:
            fleet.end(run_id, outcomes[self.get_run(run_id).job_name])
        return wait(self, run_id, **options)

    monkeypatch.setattr(HerderClient, "wait", end_then_wait)
    return outcomes


def test_start_wait_exits_non_zero_unless_the_run_succeeded(
    api: Api, herder: Herder, ending: dict[str, str]
) -> None:
    job(api, "good")
    job(api, "bad")
    ending.update(good="succeeded", bad="failed")
    good = herder("run", "start", "good", "--wait")
    assert "succeeded" in ok(good)
    bad = herder("run", "start", "bad", "--wait", "--json")
    assert bad.exit_code == 1, bad.output
    assert json.loads(bad.stdout)["state"] == "failed"
    assert "queued" in ok(herder("run", "start", "bad"))  # without --wait: started is enough


def test_start_count_wait_exits_non_zero_if_any_run_failed(
    api: Api, herder: Herder, ending: dict[str, str]
) -> None:
    job(api, "good")
    job(api, "bad")
    ending.update(good="succeeded", bad="failed")
    all_good = herder("run", "start", "good", "--count", "3", "--wait")
    assert "3 runs of good: 3 succeeded" in ok(all_good)
    failed = herder("run", "start", "bad", "--count", "2", "--wait")
    assert failed.exit_code == 1, failed.output
    assert "2 runs of bad: 2 failed" in failed.output


def test_start_takes_the_jobs_parameters_as_text_typed_by_their_declaration(
    api: Api, herder: Herder
) -> None:
    parameters = [
        {"name": "DAY", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}"},
        {"name": "COUNT", "type": "integer", "default": 1},
        {"name": "DRY_RUN", "type": "boolean", "default": False},
    ]
    api.create_job("report", parameters=parameters)
    operator = api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "ops")[1]
    args = ["run", "start", "report", "--param", "DAY=2026-11-27", "--param", "COUNT=3"]
    started = herder(*args, "--param", "DRY_RUN=true", "--json", key=operator)
    env = json.loads(ok(started))["spec"]["env"]
    assert env == {"DAY": "2026-11-27", "COUNT": "3", "DRY_RUN": "true"}
    many = herder(*args, "--count", "2", "--json", key=operator)
    assert len(json.loads(ok(many))) == 2
    wrong = herder("run", "start", "report", "--param", "DAY=2026-11-27", "--param", "COUNT=x")
    assert isinstance(wrong.exception, ApiError)
    assert (wrong.exception.status, wrong.exception.field) == (422, "params.COUNT")
    wrong_many = herder(*args[:-1], "COUNT=x", "--count", "2")
    assert isinstance(wrong_many.exception, ApiError)
    assert (wrong_many.exception.status, wrong_many.exception.field) == (422, "params.COUNT")
    for raw in (
        herder(*args, "--env", "A=1", key=operator),
        herder(*args, "--count", "2", "--arg", "x", key=operator),
    ):
        assert isinstance(raw.exception, ApiError)
        assert raw.exception.status == 403
        assert "needs a developer" in raw.exception.detail


def test_run_show_says_how_a_stopped_attempt_ended(api: Api, herder: Herder) -> None:
    created = ok(herder("job", "create", "graceful", "--command", "true", "--stop-grace", "5",
                        "--json"))  # fmt: skip
    assert json.loads(created)["spec"]["stop_grace_seconds"] == 5
    worker_id = register_worker(api)
    run = json.loads(ok(herder("run", "start", "graceful", "--json")))
    (assignment,) = claim(api, worker_id)["assignments"]
    ok(herder("run", "cancel", run["id"]))
    stopped = completion(assignment, "cancelled", None) | {"stopped_by": "sigterm"}
    report(api, worker_id, completions=[stopped])
    shown = ok(herder("run", "show", run["id"]))
    assert "STOPPED BY" in shown
    assert "sigterm" in shown


def test_run_suspend_and_resume_hold_a_run_and_queue_it_again(api: Api, herder: Herder) -> None:
    (queued,) = batch(api, api.create_job()["id"], 1)
    assert ok(herder("run", "suspend", queued)).strip() == f"run {queued} is suspended"
    assert json.loads(ok(herder("run", "show", queued, "--json")))["state"] == "suspended"
    resumed = json.loads(ok(herder("run", "resume", queued, "--json")))
    assert resumed["state"] == "queued"
    twice = herder("run", "resume", queued)
    assert isinstance(twice.exception, ApiError)
    assert twice.exception.status == 409
    assert "not suspended" in twice.exception.detail


@pytest.fixture
def printing(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that runs each started run in two steps, one each time the CLI reads the run
    or its output: it prints ``hello`` to stdout; then ``oops`` to stderr, and succeeds."""
    worker_id = register_worker(api)
    running: list[dict[str, Any]] = []

    def step() -> None:
        if running:
            assignment = running.pop()
            oops = log(assignment, 1, "oops\n", "stderr")
            report(api, worker_id, logs=[oops], completions=[completion(assignment)])
        else:
            running.extend(claim(api, worker_id)["assignments"])
            for assignment in running:
                report(api, worker_id, logs=[log(assignment, 0, "hello\n")])

    for name in ("get_run", "logs"):
        read = getattr(HerderClient, name)

        def stepping(self: HerderClient, *args: Any, _read: Any = read, **options: Any) -> Any:
            step()
            return _read(self, *args, **options)

        monkeypatch.setattr(HerderClient, name, stepping)


@pytest.mark.parametrize("how", ["--wait", "--follow"])
@pytest.mark.usefixtures("printing")
def test_start_wait_or_follow_prints_what_the_job_printed(
    api: Api, herder: Herder, how: str
) -> None:
    api.create_job("talker")
    started = herder("run", "start", "talker", how)
    assert started.stdout.startswith("hello\n"), started.output
    assert started.stderr == "oops\n"
    assert "succeeded" in ok(started)
    scripted = json.loads(ok(herder("run", "start", "talker", how, "--json")))
    assert scripted["state"] == "succeeded"  # and nothing else: --json is the run alone


def test_run_logs_prints_every_page_written_so_far(api: Api, herder: Herder) -> None:
    worker_id = register_worker(api)
    (run_id,) = batch(api, api.create_job()["id"], 1)
    (assignment,) = claim(api, worker_id)["assignments"]
    lines = [f"line {seq}\n" for seq in range(1_500)]  # a page of the API is 1,000 chunks
    for first in range(0, len(lines), 500):
        chunks = [log(assignment, seq, lines[seq]) for seq in range(first, first + 500)]
        report(api, worker_id, logs=chunks)
    assert ok(herder("run", "logs", run_id)) == "".join(lines)  # while it still runs
    report(api, worker_id, completions=[completion(assignment)])
    assert ok(herder("run", "logs", run_id)) == "".join(lines)
