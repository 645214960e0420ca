"""A tenant moved between two real cells through the edge (docs/cells.md, "Moving a tenant"):
every kind of definition arrives with its ids, its secrets sealed by the target's own key, its
API key working through the edge; its runs stay behind, readable by id; a move refused
changes nothing, a failed one is taken back and runs again. Cell A (the default) and the
directory are on each store; cell B on SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from herder.app import moves
from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.domain.cells import Home
from herder.domain.errors import Conflict
from herder.domain.models import Role
from herder.domain.moves import MoveState, TenantExport
from herder.store.schema import workflow_versions
from herder.store.store import Store
from tests.integration.test_edge import TwoCells, bearer, cells, directory_url
from tests.integration.test_hooks import SECRET, herder_headers

__all__ = ["cells", "directory_url"]  # the fixtures, shared with test_edge

PROGRAM = b"print('moved')\n"
JOB = {"runtime": "shell", "command": "true"}


def _made(answer: Any) -> dict[str, Any]:
    assert answer.status_code in (200, 201), answer.text
    made: dict[str, Any] = answer.json()
    return made


def _everything(cells: TwoCells, key: str) -> dict[str, str]:
    """One definition of every kind the move copies, made through the edge; their ids."""
    edge, auth = cells.edge, bearer(key)
    artifact = _made(
        edge.post("/v1/artifacts", headers=auth, files={"file": ("m.py", PROGRAM, "text/x-python")})
    )
    _made(edge.put("/v1/secrets/API_TOKEN", headers=auth, json={"value": "s3cr3t"}))
    job = _made(
        edge.post(
            "/v1/jobs",
            headers=auth,
            json={
                "name": "j",
                "runtime": "python",
                "artifact": artifact["id"],
                "secrets": {"TOKEN": "API_TOKEN"},
            },
        )
    )
    schedule = _made(
        edge.post("/v1/schedules", headers=auth, json={"job_id": job["id"], "cron": "@daily"})
    )
    tasks = [{"name": "t", "job": "j"}]
    workflow = _made(edge.post("/v1/workflows", headers=auth, json={"name": "w", "tasks": tasks}))
    _made(
        edge.put(
            f"/v1/workflows/{workflow['id']}",
            headers=auth,
            json={"name": "w", "tasks": [*tasks, {"name": "u", "job": "j"}]},
        )
    )
    limit = _made(edge.post("/v1/limits", headers=auth, json={"name": "api", "max_running": 1}))
    trigger = _made(
        edge.post("/v1/triggers", headers=auth, json={"name": "t", "event": "push", "job": "j"})
    )
    hook = _made(edge.post("/v1/hooks", headers=auth, json={"name": "h", "secret": SECRET}))
    channel = _made(
        edge.post(
            "/v1/alert-channels",
            headers=auth,
            json={"name": "c", "url": "https://hooks.example.com/herder"},
        )
    )
    rule = _made(
        edge.post(
            "/v1/alert-rules",
            headers=auth,
            json={"name": "r", "kind": "run_failed", "channel_ids": [channel["id"]]},
        )
    )
    run = _made(edge.post(f"/v1/jobs/{job['id']}/runs", headers=auth, json={}))
    return {
        "artifact": artifact["id"],
        "job": job["id"],
        "schedule": schedule["id"],
        "workflow": workflow["id"],
        "limit": limit["id"],
        "trigger": trigger["id"],
        "hook": hook["id"],
        "hook_url": hook["url"],
        "channel": channel["id"],
        "rule": rule["id"],
        "run": run["id"],
    }


Alpha = tuple[str, str, dict[str, str]]  # a tenant in the default cell, its key, its ids


@pytest.fixture
def alpha(cells: TwoCells) -> Alpha:
    """A tenant in the default cell with one definition of every kind, and its admin key."""
    tenant_id, key = cells.tenant_in("default", "alpha")
    return tenant_id, key, _everything(cells, key)


def _move(cells: TwoCells, tenant_id: str, key: str, target_key: str | None) -> Any:
    headers = {**bearer(key), **({"X-Herder-Target-Key": target_key} if target_key else {})}
    return cells.edge.post(f"/v1/cells/b/tenants/{tenant_id}/move", headers=headers)


def _home(cells: TwoCells, tenant_id: str) -> Home:
    home = cells.directory.home_of(tenant_id)
    assert home is not None
    return home


def test_a_tenant_moves_with_every_definition_and_its_key_works_after(
    cells: TwoCells, alpha: Alpha
) -> None:
    tenant_id, key, ids = alpha
    before = cells.a_store.schedules.get(tenant_id, ids["schedule"])
    moved = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert moved.status_code == 200, moved.text
    assert moved.json() == {
        "tenant_id": tenant_id, "from_cell": "default", "to_cell": "b",
        "schedules": 1, "artifacts": 1,
    }  # fmt: skip
    home = _home(cells, tenant_id)
    assert (home.cell.name, home.moving_to, [cell.name for cell in home.previous]) == (
        "b",
        None,
        ["default"],
    )
    auth = bearer(key)  # the same token, through the edge, now to cell b
    for path, id_ in [
        ("/v1/jobs", ids["job"]),
        ("/v1/schedules", ids["schedule"]),
        ("/v1/workflows", ids["workflow"]),
        ("/v1/limits", ids["limit"]),
        ("/v1/triggers", ids["trigger"]),
        ("/v1/hooks", ids["hook"]),
        ("/v1/alert-channels", ids["channel"]),
        ("/v1/alert-rules", ids["rule"]),
        ("/v1/artifacts", ids["artifact"]),
    ]:
        answer = cells.edge.get(f"{path}/{id_}", headers=auth)
        assert answer.status_code == 200, (path, answer.text)
    assert cells.b_store.workflows.get(tenant_id, ids["workflow"]).version == 2
    with cells.b_store.database.read() as connection:
        versions = connection.execute(
            select(workflow_versions.c.version).where(
                workflow_versions.c.workflow_id == ids["workflow"]
            )
        ).scalars()
        assert sorted(versions) == [1, 2]
    content = cells.edge.get(f"/v1/artifacts/{ids['artifact']}/content", headers=auth)
    assert content.content == PROGRAM
    # the secret, sealed by b's own key, opens there (a's key is not b's)
    with cells.b_store.database.read() as connection:
        revealed = cells.b_store.secrets.reveal(connection, tenant_id, {"TOKEN": "API_TOKEN"})
    assert revealed == {"TOKEN": "s3cr3t"}
    after = cells.b_store.schedules.get(tenant_id, ids["schedule"])
    assert (after.next_fire_at, after.fired_count) == (before.next_fire_at, before.fired_count)
    # the hook's secret too: a delivery signed with it is accepted in b
    body = b'{"ref": "main"}'
    delivered = cells.edge.post(ids["hook_url"], content=body, headers=herder_headers(body, "m-1"))
    assert delivered.status_code == 201, delivered.text
    # writes go to b; the run made before the move is read, by id, from a
    assert cells.edge.post(f"/v1/jobs/{ids['job']}/runs", headers=auth, json={}).status_code == 201
    old = cells.edge.get(f"/v1/runs/{ids['run']}", headers=auth)
    assert (old.status_code, old.json()["id"]) == (200, ids["run"])
    listed = cells.edge.get("/v1/runs", headers=auth).json()["items"]
    assert ids["run"] not in [run["id"] for run in listed]  # listings: the new cell's only
    # an edge whose cache is stale reaches a: sent back, but for the history it left there
    assert cells.a_store.moves.status(tenant_id).state == "moved"
    with httpx.Client(base_url=cells.a.url) as stale:
        for method, path in [("POST", "/v1/jobs"), ("GET", "/v1/jobs")]:
            answer = stale.request(method, path, headers=auth, json={})
            assert answer.status_code == 503, (method, path, answer.text)
            assert answer.json()["cell"] == "b"
            assert "moved to cell b" in answer.json()["detail"]
        assert stale.get(f"/v1/runs/{ids['run']}", headers=auth).status_code == 200


def test_a_refused_move_changes_nothing(cells: TwoCells) -> None:
    tenant_id, key = cells.tenant_in("default", "alpha")
    job = {"name": "j", "runtime": "shell", "command": "true"}
    _made(cells.edge.post("/v1/jobs", headers=bearer(key), json=job))
    # not an admin of the system tenant: the tenant's own admin
    assert _move(cells, tenant_id, key, cells.b_admin).status_code == 403
    # the target's key given for the source, or none for the target
    assert _move(cells, tenant_id, cells.b_admin, cells.b_admin).status_code == 403
    assert _move(cells, tenant_id, cells.a_admin, None).status_code == 403
    # a forged target key: a tenant part of b's system tenant, a secret no key has
    b_system = cells.b_admin.split(".")[0]
    forged = f"{b_system}.key_01H00000000000000000000000.nothing"
    assert _move(cells, tenant_id, cells.a_admin, forged).status_code == 401
    # an unknown cell, an unknown tenant
    unknown = cells.edge.post(
        f"/v1/cells/nowhere/tenants/{tenant_id}/move", headers=bearer(cells.a_admin)
    )
    assert unknown.status_code == 404
    # a pool the tenant uses that b lacks: 409 naming it
    pool = {"name": "gpus", "shares": [{"tenant_id": tenant_id, "gpus": 1}]}
    _made(cells.edge.post("/v1/pools", headers=bearer(cells.a_admin), json=pool))
    lacking = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert lacking.status_code == 409, lacking.text
    assert "gpus" in lacking.json()["detail"]
    # a move under way already (to another cell)
    cells.directory.begin_move(tenant_id, "default", "default", cells.a_store.clock.now())
    assert _move(cells, tenant_id, cells.a_admin, cells.b_admin).status_code == 409
    cells.directory.end_move(tenant_id)
    home = _home(cells, tenant_id)
    assert (home.cell.name, home.moving_to, home.previous) == ("default", None, [])
    assert cells.a_store.moves.status(tenant_id).state is None
    assert cells.edge.post("/v1/jobs", headers=bearer(key), json={**job, "name": "k"}).is_success
    with pytest.raises(Exception, match="not found"):
        cells.b_store.access.get_tenant(tenant_id)


def test_a_failed_import_is_taken_back_and_the_move_runs_again(
    cells: TwoCells, alpha: Alpha, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, key, ids = alpha
    real = moves.import_tenant

    def failing(store: Store, document: TenantExport) -> Any:
        real(store, document)  # imported, then lost: the edge sees a refusal
        raise Conflict("the import failed (a test's)")

    monkeypatch.setattr(moves, "import_tenant", failing)
    failed = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert failed.status_code == 409, failed.text
    home = _home(cells, tenant_id)
    assert (home.cell.name, home.moving_to) == ("default", None)
    assert cells.a_store.moves.status(tenant_id).state is None  # unfrozen
    with pytest.raises(Exception, match="not found"):
        cells.b_store.access.get_tenant(tenant_id)  # the partial import removed
    auth = bearer(key)
    assert cells.edge.post(f"/v1/jobs/{ids['job']}/runs", headers=auth, json={}).is_success
    monkeypatch.setattr(moves, "import_tenant", real)
    again = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert again.status_code == 200, again.text
    assert _home(cells, tenant_id).cell.name == "b"
    assert cells.edge.get(f"/v1/jobs/{ids['job']}", headers=auth).status_code == 200


def test_a_moving_tenants_writes_are_answered_503_naming_the_cell(cells: TwoCells) -> None:
    tenant_id, key = cells.tenant_in("default", "alpha")
    _, other = cells.tenant_in("default", "beta")
    job = {"name": "j", "runtime": "shell", "command": "true"}
    # the tenant's key not used yet: the edge has not cached its home
    cells.directory.begin_move(tenant_id, "default", "b", cells.a_store.clock.now())
    refused = cells.edge.post("/v1/jobs", headers=bearer(key), json=job)
    assert refused.status_code == 503, refused.text
    assert refused.json()["cell"] == "b"
    assert "moving to cell b" in refused.json()["detail"]
    assert refused.headers["Retry-After"] == "2"
    assert cells.edge.get("/v1/jobs", headers=bearer(key)).status_code == 200  # reads go on
    assert cells.edge.post("/v1/jobs", headers=bearer(other), json=job).status_code == 201
    cells.directory.end_move(tenant_id)


def test_a_tenant_admin_may_not_export_import_or_freeze(cells: TwoCells) -> None:
    tenant_id, key = cells.tenant_in("default", "alpha")
    for method, path, body in [
        ("PUT", f"/v1/tenants/{tenant_id}/move", {"state": "frozen", "cell": "b"}),
        ("GET", f"/v1/tenants/{tenant_id}/export", None),
        ("POST", "/v1/tenants/import", {"tenant_id": tenant_id, "tables": {}}),
        ("DELETE", f"/v1/tenants/{tenant_id}/import", None),
    ]:
        answer = cells.edge.request(method, path, headers=bearer(key), json=body)
        assert answer.status_code == 403, (method, path, answer.text)
    developer = cells.a_store.access.create_api_key(tenant_id, Role.DEVELOPER, "d")[1]
    answer = cells.edge.get(f"/v1/tenants/{tenant_id}/export", headers=bearer(developer))
    assert answer.status_code == 403
    assert cells.a_store.moves.status(tenant_id).state is None


def test_the_cli_moves_a_tenant_with_the_target_key_from_a_file(
    cells: TwoCells, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tenant_id, _ = cells.tenant_in("default", "alpha")
    target_key = tmp_path / "b-admin.key"
    target_key.write_text(cells.b_admin + "\n")
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_URL", "http://testserver")
    monkeypatch.setenv("HERDER_API_KEY", cells.a_admin)
    monkeypatch.setattr(
        common,
        "HerderClient",
        lambda url, api_key, **options: HerderClient(url, api_key, http=cells.edge, **options),
    )
    moved = CliRunner().invoke(
        app, ["tenant", "move", tenant_id, "--to", "b", "--target-key-file", str(target_key)]
    )
    assert moved.exit_code == 0, moved.output
    assert "moved tenant alpha from cell default to cell b" in moved.output
    assert _home(cells, tenant_id).cell.name == "b"


def test_a_move_stopped_after_its_flip_is_finished_by_running_it_again(
    cells: TwoCells, alpha: Alpha, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, key, ids = alpha
    real = moves.shift

    def failing(store: Store, tenant: str, wanted: MoveState | None, *rest: Any) -> Any:
        if store is cells.a_store and wanted is MoveState.MOVED:
            raise Conflict("the source did not answer (a test's)")
        return real(store, tenant, wanted, *rest)

    monkeypatch.setattr(moves, "shift", failing)
    stopped = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert stopped.status_code == 409, stopped.text
    home = _home(cells, tenant_id)
    assert (home.cell.name, home.moving_to) == ("b", "b")  # flipped, still under way
    auth = bearer(key)
    assert cells.edge.post(f"/v1/jobs/{ids['job']}/runs", headers=auth, json={}).status_code == 503
    monkeypatch.setattr(moves, "shift", real)
    finished = _move(cells, tenant_id, cells.a_admin, cells.b_admin)
    assert finished.status_code == 200, finished.text
    assert _home(cells, tenant_id).moving_to is None
    assert cells.a_store.moves.status(tenant_id).state is MoveState.MOVED
    assert cells.b_store.moves.status(tenant_id).state is None
    assert cells.edge.post(f"/v1/jobs/{ids['job']}/runs", headers=auth, json={}).status_code == 201


def test_a_tenant_moves_back_to_a_cell_it_left_and_finds_its_history_there(
    cells: TwoCells, alpha: Alpha
) -> None:
    """The cell it left holds its history and its old definitions: the return replaces
    those by what it has now, under the same ids, and keeps the history."""
    tenant_id, key, ids = alpha
    edge, auth = cells.edge, bearer(key)
    weekly = {"job_id": ids["job"], "cron": "@weekly"}
    kept, gone = (_made(edge.post("/v1/schedules", headers=auth, json=weekly)) for _ in "ab")
    assert _move(cells, tenant_id, cells.a_admin, cells.b_admin).status_code == 200
    # in cell b: a job added, a limit deleted, schedules changed and deleted
    added = _made(edge.post("/v1/jobs", headers=auth, json={**JOB, "name": "k"}))
    assert edge.delete(f"/v1/limits/{ids['limit']}", headers=auth).status_code == 204
    hourly = {"cron": "@hourly"}
    _made(edge.patch(f"/v1/schedules/{ids['schedule']}", headers=auth, json=hourly))
    assert edge.delete(f"/v1/schedules/{gone['id']}", headers=auth).status_code == 204
    back = edge.post(
        f"/v1/cells/default/tenants/{tenant_id}/move",
        headers={**bearer(cells.b_admin), "X-Herder-Target-Key": cells.a_admin},
    )
    assert back.status_code == 200, back.text
    assert back.json()["from_cell"] == "b"
    home = _home(cells, tenant_id)
    assert (home.cell.name, [cell.name for cell in home.previous]) == ("default", ["b"])
    assert cells.a_store.moves.status(tenant_id).state is None
    assert cells.b_store.moves.status(tenant_id).state is MoveState.MOVED
    # its definitions as they are now, under the same ids
    assert edge.get(f"/v1/jobs/{added['id']}", headers=auth).status_code == 200
    assert edge.get(f"/v1/limits/{ids['limit']}", headers=auth).status_code == 404
    schedule = _made(edge.get(f"/v1/schedules/{ids['schedule']}", headers=auth))
    assert schedule["spec"]["cron"] == "@hourly"
    assert schedule["next_due_at"] is not None  # due again here
    assert _made(edge.get(f"/v1/schedules/{kept['id']}", headers=auth))["spec"]["cron"] == "@weekly"
    assert edge.get(f"/v1/schedules/{gone['id']}", headers=auth).status_code == 404
    # the history it left here, read here; its writes go on here
    assert _made(edge.get(f"/v1/runs/{ids['run']}", headers=auth))["job_id"] == ids["job"]
    assert edge.post(f"/v1/jobs/{ids['job']}/runs", headers=auth, json={}).status_code == 201
    # and it may leave again for b, which holds it as moved
    assert _move(cells, tenant_id, cells.a_admin, cells.b_admin).status_code == 200
    assert cells.b_store.jobs.get(tenant_id, added["id"]).name == "k"
