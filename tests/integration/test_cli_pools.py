"""``herder pool …``, ``herder tenant update --default-pool`` and ``herder worker --pool``
against the in-process API (docs/pools.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import Result

from herder.cli.workers import _labels
from herder.client import ApiError
from herder.domain.models import Role
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_pools_are_created_listed_shown_changed_and_deleted(api: Api, herder: Herder) -> None:
    ml = api.store.access.create_tenant("ml")
    created = json.loads(
        ok(
            herder("pool", "create", "a100", "--description", "the A100 boxes",
                   "--share", "ml=cpu=8,memory_mb=16384,gpus=4", "--json")
        )
    )  # fmt: skip
    assert created["selector"] == {"pool": "a100"}
    assert created["shares"] == [{"tenant_id": ml.id, "cpu": 8.0, "memory_mb": 16384, "gpus": 4}]
    assert "a100" in ok(herder("pool", "list"))
    shown = ok(herder("pool", "show", "a100"))
    assert "the A100 boxes" in shown
    assert "share: ml: cpu 8, memory 16384 MB, gpus 4" in shown  # the tenant by name

    changed = json.loads(
        ok(herder("pool", "update", created["id"], "--selector", "gpu=a100",
                  "--share", f"{ml.id}=gpus=2", "--json"))
    )  # fmt: skip
    assert changed["selector"] == {"gpu": "a100"}
    assert changed["shares"] == [{"tenant_id": ml.id, "cpu": 0.0, "memory_mb": 0, "gpus": 2}]
    cleared = json.loads(
        ok(herder("pool", "update", "a100", "--default-selector", "--no-shares", "--json"))
    )
    assert (cleared["selector"], cleared["shares"]) == ({"pool": "a100"}, [])

    assert "deleted pool a100" in ok(herder("pool", "delete", "a100"))
    gone = herder("pool", "show", "a100")
    assert isinstance(gone.exception, ApiError)
    assert gone.exception.status == 404


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["pool", "create", "p", "--share", "ml=cpu=-1"], "shares.0.cpu"),
        (["pool", "create", "p", "--share", "ml=gpus=many"], "shares.0.gpus"),
        (["pool", "create", "p", "--share", "ml=disks=1"], "not one of cpu=, memory_mb=, gpus="),
        (["pool", "create", "p", "--share", "nobody=gpus=1"], "no tenant named 'nobody'"),
        (["pool", "create", "p", "--selector", "pool"], "must look like KEY=VALUE"),
        (["pool", "create", "Big Pool"], "name"),
        (["pool", "update", "p"], "nothing to change"),
        (["pool", "update", "p", "--share", "ml=", "--no-shares"], "choose one"),
        (["pool", "create", "p", "--autoscaling", "{max: 3"], "--autoscaling is not JSON"),
        (["pool", "create", "p", "--autoscaling", '{"max_workers": 3}'], "autoscaling.worker"),
    ],
)
def test_bad_pool_commands_say_what_is_wrong(
    api: Api, herder: Herder, args: list[str], says: str
) -> None:
    api.store.access.create_tenant("ml")
    result = herder(*args)
    assert result.exit_code != 0
    told = result.output + (str(result.exception) if result.exception else "")
    if isinstance(result.exception, ApiError):
        told += f" {result.exception.field}"
    assert says in told


def test_a_pools_autoscaling_is_set_shown_and_turned_off(api: Api, herder: Herder) -> None:
    policy = '{"worker": {"cpu": 2, "memory_mb": 2048, "slots": 4}, "min_workers": 2}'
    ok(herder("pool", "create", "cpu", "--autoscaling", policy))
    shown = ok(herder("pool", "autoscaling", "cpu"))
    assert "pool cpu: 2 workers wanted" in shown
    assert "queued: cpu 0, 0 MB, 0 GPUs, 0 runs" in shown
    as_json = json.loads(ok(herder("pool", "autoscaling", "cpu", "--json")))
    assert as_json["autoscaling"]["worker"]["slots"] == 4
    off = json.loads(ok(herder("pool", "update", "cpu", "--autoscaling", "null", "--json")))
    assert off["autoscaling"] is None


def test_the_forecast_shows_the_minutes_the_schedules_start_runs_in(
    api: Api, herder: Herder
) -> None:
    job = api.create_job("tick", resources={"cpu": 0.5, "memory_mb": 128})
    schedule = {"job_id": job["id"], "cron": "* * * * *"}
    assert api.http.post("/v1/schedules", headers=api.admin, json=schedule).status_code == 201
    shown = ok(herder("forecast", "--minutes", "3"))
    assert shown.count(" 0.5 ") >= 2  # a run a minute, half a core busy
    as_json = json.loads(ok(herder("forecast", "--minutes", "2", "--json")))
    assert as_json["minutes"][1]["runs_starting"] == 1
    assert herder("forecast", "--minutes", "0").exit_code != 0


def test_a_tenant_lists_its_pools_with_its_share_only(api: Api, herder: Herder) -> None:
    ml = api.store.access.create_tenant("ml")
    web = api.store.access.create_tenant("web")
    ok(herder("pool", "create", "a100", "--share", "ml=gpus=4", "--share", "web=cpu=2"))
    key = api.store.access.create_api_key(ml.id, Role.VIEWER, "v")[1]
    listed = json.loads(ok(herder("pool", "list", "--json", key=key)))
    assert [share["tenant_id"] for share in listed["items"][0]["shares"]] == [ml.id]
    assert web.id not in ok(herder("pool", "show", "a100", key=key))
    refused = herder("pool", "delete", "a100", key=key)
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 403


def test_a_tenants_default_pool_is_set_and_cleared(api: Api, herder: Herder) -> None:
    api.store.access.create_tenant("ml")
    ok(herder("pool", "create", "a100", "--share", "ml="))
    table = ok(herder("tenant", "update", "ml", "--default-pool", "a100"))
    assert "a100" in table
    assert json.loads(ok(herder("tenant", "show", "ml", "--json")))["default_pool"] == "a100"
    cleared = json.loads(ok(herder("tenant", "update", "ml", "--clear", "default-pool", "--json")))
    assert cleared["default_pool"] is None
    refused = herder("tenant", "update", "ml", "--default-pool", "cpu")
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.field == "default_pool"
    both = herder("tenant", "update", "ml", "--default-pool", "a100", "--clear", "default-pool")
    assert both.exit_code == 1
    assert "choose one" in both.output


def test_run_show_names_the_runs_pool(api: Api, herder: Herder) -> None:
    ok(herder("pool", "create", "a100", "--share", f"{api.tenant_id}=gpus=1"))
    run = api.start_run(api.create_job(pool="a100")["id"])
    assert "pool: a100" in ok(herder("run", "show", str(run["id"])))


def test_worker_pool_adds_the_pool_label() -> None:
    assert _labels(["zone=eu"], "a100") == {"zone": "eu", "pool": "a100"}
    assert _labels(["pool=a100"], "a100") == {"pool": "a100"}
    assert _labels(["zone=eu"], None) == {"zone": "eu"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--pool", "A100"], "--pool 'A100': a pool name is"),
        (["--pool", "a100", "--label", "pool=h100"], "--pool a100 and --label pool=h100"),
    ],
)
def test_a_worker_pool_that_cannot_be_is_refused_before_it_starts(
    herder: Herder, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "wtk_unused")
    result = herder("worker", "--server", "http://testserver", *args)
    assert result.exit_code == 1, result.output
    assert says in result.output


def test_apply_asks_for_a_jobs_pool_before_any_change(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    ok(herder("pool", "create", "a100", "--share", f"{api.tenant_id}="))
    ok(herder("pool", "create", "h100"))  # not the system tenant's to use
    path = tmp_path / "herder.yaml"
    path.write_text(JOBS.format(first="a100", second="h100"))
    result = herder("apply", "-f", str(path))
    assert result.exit_code == 2, result.output
    assert "jobs[1].pool: no pool named h100 that your tenant may use" in result.output
    assert "workflows[0].tasks[0].overrides.pool: no pool named h100" in result.output
    assert "schedules[0].overrides.pool: no pool named h100" in result.output
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []

    path.write_text(JOBS.format(first="a100", second="a100"))
    ok(herder("apply", "-f", str(path)))
    jobs = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    assert {job["spec"]["pool"] for job in jobs} == {"a100"}


JOBS = """
jobs:
  - name: prepare
    runtime: shell
    command: "true"
    pool: {first}
  - name: train
    runtime: shell
    command: "true"
    pool: {second}
workflows:
  - name: nightly
    tasks:
      - name: train
        job: train
        overrides: {{pool: {second}}}
schedules:
  - name: often
    job: prepare
    cron: "@daily"
    overrides: {{pool: {second}}}
"""
