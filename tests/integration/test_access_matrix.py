"""Who may call what, generated from the OpenAPI document so that a new route is covered
without anyone listing it.

1. Every route that takes an ID answers 404 for another tenant's object (never its data,
   never 403), and for a pool the caller's tenant has no share in; a registered worker's
   route refuses (401) the fleet token and another worker's secret: only its own secret
   acts as it.
2. Every route refuses (403; 401 without a key, and on a worker route for the other kind of
   worker credential) every credential that may not use it, and
   admits every credential that may. Roles nest (admin ⊃ developer ⊃ operator ⊃ viewer):
   reading needs a viewer, starting and stopping runs an operator, changing definitions a
   developer (and so do a run's raw overrides, ``args`` and ``env``: an operator starts
   runs with a job's declared parameters only); the system tenant's admins administer
   tenants, the fleet and worker tokens, and any tenant's keys and audit log; a tenant's
   own admins read their tenant, manage its keys and read its audit log;
   the fleet's worker token only registers a worker, whose secret admits only that worker's
   calls (docs/tenants.md, docs/worker-protocol.md).

A path parameter the matrix has no object for, or a body it cannot build, fails the test:
a new route is exercised or the test says why not, never skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

import pytest

from herder.domain.models import Role
from herder.domain.overrides import RAW_OVERRIDES
from herder.domain.sign_in import Person
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.openapi import operations, resolve
from tests.integration.registered import as_worker, register_worker

SECRET = "owner-secret-7f3a"  # in the owner's job; no answer to an intruder may carry it


class Needs(Enum):
    """What a route asks of its caller, weakest first within each kind."""

    NOTHING = "no credentials"
    VIEWER = "any API key"
    OPERATOR = "an operator, developer or admin key"
    DEVELOPER = "a developer or admin key"
    TENANT_ADMIN = "an admin of that tenant, or a system admin"
    SYSTEM_ADMIN = "an admin of the system tenant"
    FLEET = "the fleet's worker token"
    SIGNATURE = "a signature by the inbound webhook's secret (no key of any kind)"
    WORKER = "the registered worker's own secret"


# What an operator may do beyond a viewer: start, stop, suspend, resume, re-prioritise, re-run
# and repair runs, backfill, pause, resume and fire schedules; never change a definition
# (docs/tenants.md).
OPERATIONS = [
    ("POST", "/v1/jobs/{job_id}/runs"),
    ("POST", "/v1/runs/batch"),
    ("POST", "/v1/runs/{run_id}/cancel"),
    ("POST", "/v1/runs/{run_id}/suspend"),
    ("POST", "/v1/runs/{run_id}/resume"),
    ("POST", "/v1/runs/{run_id}/priority"),
    ("POST", "/v1/runs/{run_id}/rerun"),
    ("DELETE", "/v1/runs/{run_id}/checkpoint"),  # start it over
    ("POST", "/v1/workflows/{workflow_id}/runs"),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/cancel"),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/suspend"),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/resume"),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/repair"),
    ("POST", "/v1/schedules/{schedule_id}/backfills"),
    ("POST", "/v1/backfills/{backfill_id}/cancel"),
    ("POST", "/v1/schedules/{schedule_id}/pause"),
    ("POST", "/v1/schedules/{schedule_id}/resume"),
    ("POST", "/v1/schedules/{schedule_id}/trigger"),
    ("POST", "/v1/events"),  # an event starts what its triggers say: as starting runs
    ("POST", "/v1/workflow-runs/{workflow_run_id}/tasks/{task}/approve"),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/tasks/{task}/reject"),
    # the caller's own notices of a job: the on-call role's, as they write outside Herder
    ("PUT", "/v1/jobs/{job_id}/notices"),
    ("DELETE", "/v1/jobs/{job_id}/notices"),
]

# The exceptions to "GET needs a viewer, anything else a developer", from docs/tenants.md
# and the worker protocol.
EXCEPTIONS = {
    **dict.fromkeys(OPERATIONS, Needs.OPERATOR),
    ("GET", "/healthz"): Needs.NOTHING,
    ("POST", "/v1/hooks/{hook_id}"): Needs.SIGNATURE,
    ("GET", "/readyz"): Needs.NOTHING,
    ("POST", "/v1/cron/preview"): Needs.VIEWER,  # computes, stores nothing
    # the job's own data, as its definition is a developer's: a viewer sees only its size
    ("GET", "/v1/runs/{run_id}/checkpoint/content"): Needs.DEVELOPER,
    ("GET", "/v1/tenants"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/tenants"): Needs.SYSTEM_ADMIN,
    ("PATCH", "/v1/tenants/{tenant_id}"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/tenants/{tenant_id}"): Needs.TENANT_ADMIN,
    ("PUT", "/v1/tenants/{tenant_id}/budgets"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/tenants/{tenant_id}/budgets"): Needs.TENANT_ADMIN,
    ("POST", "/v1/tenants/{tenant_id}/keys"): Needs.TENANT_ADMIN,
    # a tenant's move between cells (docs/cells.md): the system admins of each cell
    ("PUT", "/v1/tenants/{tenant_id}/move"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/tenants/{tenant_id}/export"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/tenants/{tenant_id}/export/artifacts/{artifact_id}"): Needs.SYSTEM_ADMIN,
    ("PUT", "/v1/tenants/{tenant_id}/import/artifacts/{artifact_id}"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/tenants/import"): Needs.SYSTEM_ADMIN,
    ("DELETE", "/v1/tenants/{tenant_id}/import"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/keys"): Needs.TENANT_ADMIN,
    ("POST", "/v1/keys"): Needs.TENANT_ADMIN,
    ("GET", "/v1/keys/{key_id}"): Needs.TENANT_ADMIN,
    ("POST", "/v1/keys/{key_id}/revoke"): Needs.TENANT_ADMIN,
    ("GET", "/v1/audit"): Needs.TENANT_ADMIN,
    ("POST", "/v1/pools"): Needs.SYSTEM_ADMIN,
    ("PATCH", "/v1/pools/{pool_id}"): Needs.SYSTEM_ADMIN,
    ("DELETE", "/v1/pools/{pool_id}"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/pools/{pool_id}/autoscaling"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/worker-tokens"): Needs.SYSTEM_ADMIN,
    ("GET", "/v1/workers"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/workers/{worker_id}/drain"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/workers/{worker_id}/undrain"): Needs.SYSTEM_ADMIN,
    ("POST", "/v1/workers/{worker_id}/forget"): Needs.SYSTEM_ADMIN,
    # signing in (docs/tenants.md "Single sign-on"): before any credential; off here (404)
    ("GET", "/auth/config"): Needs.NOTHING,
    ("GET", "/auth/login"): Needs.NOTHING,
    ("GET", "/auth/callback"): Needs.NOTHING,
    ("POST", "/auth/cli-sessions"): Needs.NOTHING,
    ("GET", "/auth/session"): Needs.VIEWER,
    ("POST", "/auth/logout"): Needs.VIEWER,  # a key has no session to end: 409
    ("GET", "/v1/sessions"): Needs.TENANT_ADMIN,
    ("POST", "/v1/sessions/{session_id}/revoke"): Needs.TENANT_ADMIN,
}


def needs(method: str, path: str, operation: dict[str, Any]) -> Needs:
    if (method, path) in EXCEPTIONS:
        return EXCEPTIONS[method, path]
    if (method, path) == ("POST", "/v1/workers"):
        return Needs.FLEET
    if "worker protocol" in operation.get("tags", []):
        return Needs.WORKER
    return Needs.VIEWER if method == "GET" else Needs.DEVELOPER


@dataclass(frozen=True)
class Credential:
    name: str
    system: bool = False
    role: Role | None = None  # None: a worker credential (or nothing)
    worker: Needs | None = None  # the worker credential it is: FLEET or WORKER

    def may(self, need: Needs) -> bool:
        if need is Needs.NOTHING:
            return True
        if need is Needs.SIGNATURE:
            return False  # no credential the matrix holds signs a delivery
        if need in (Needs.FLEET, Needs.WORKER) or self.worker is not None:
            return need is self.worker
        if self.role is None:
            return False
        at_least = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.DEVELOPER: 2, Role.ADMIN: 3}[self.role]
        if need is Needs.VIEWER:
            return True
        if need is Needs.OPERATOR:
            return at_least >= 1
        if need is Needs.DEVELOPER:
            return at_least >= 2
        if need is Needs.TENANT_ADMIN:  # of its own tenant, which the matrix asks about
            return at_least == 3
        return self.system and at_least == 3


CREDENTIALS = [
    Credential("nothing"),
    Credential("worker token", worker=Needs.FLEET),
    Credential("worker secret", worker=Needs.WORKER),
    *(Credential(f"system {role}", system=True, role=role) for role in Role),
    *(Credential(f"tenant {role}", role=role) for role in Role),
]

# Bodies a route needs before it can look at the object in its path (None: send {}).
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/workers/{worker_id}/claim"): {"max_runs": 0, "wait_seconds": 0},
    ("POST", "/v1/schedules/{schedule_id}/backfills"): {
        "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z",
    },
    ("PUT", "/v1/workflows/{workflow_id}"): {"name": "w", "tasks": [{"name": "t", "job": "j"}]},
    ("POST", "/v1/workflows/check"): {"yaml": "name: w\ntasks:\n- {name: t, job: j}\n"},
    ("POST", "/v1/workflow-runs/{workflow_run_id}/repair"): {"repair": 0},
    ("POST", "/v1/runs/{run_id}/priority"): {"priority": "high"},
    ("PUT", "/v1/secrets/{name}"): {"value": "intruder's own"},
    ("PUT", "/v1/jobs/{job_id}/notices"): {"on": ["failed"], "to": "mailto:me@example.com"},
    ("PUT", "/v1/tenants/{tenant_id}/budgets"): {"budgets": [{"period": "day", "cpu_seconds": 1}]},
}  # fmt: skip
# Routes that read an object shared between tenants (a pool and the shares in it): the
# system admins read every one; a tenant without a share in it is answered 404.
SYSTEM_WIDE = {("GET", "/v1/pools/{pool_id}")}
# Routes whose path names an object in the caller's own tenant: another tenant's call makes
# or changes its own (a secret is per tenant by name), never the owner's — checked below.
OWN_NAMESPACE = {("PUT", "/v1/secrets/{name}")}


@dataclass
class World:
    """An owner tenant with one object of every kind, an intruding tenant, a second fleet
    token, and a header set per credential."""

    ids: dict[str, str]
    own_ids: dict[str, dict[str, str]] = field(default_factory=dict)  # by a caller's tenant
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    intruder: dict[str, str] = field(default_factory=dict)
    other_worker_token: dict[str, str] = field(default_factory=dict)
    other_worker_secret: dict[str, str] = field(default_factory=dict)

    def body(self, method: str, path: str) -> Any:
        attempt = {"attempt_id": self.ids["attempt_id"], "attempt": 1}
        if (method, path) == ("POST", "/v1/attempts/{attempt_id}/logs"):
            return {"worker_id": self.ids["worker_id"], "chunks": []}
        if (method, path) == ("POST", "/v1/attempts/{attempt_id}/complete"):
            completion = {**attempt, "outcome": "succeeded", "exit_code": 0}
            return {"worker_id": self.ids["worker_id"], "completion": completion}
        return BODIES.get((method, path), {})

    def url(self, path: str, own_tenant: str | None = None) -> str:
        """With ``own_tenant``: the tenant and the key of the caller's tenant (administration
        asks whether a caller may manage its own); else the owner's objects."""
        own = self.own_ids.get(own_tenant or "", {})
        for name in _path_parameters(path):
            assert name in self.ids, f"the matrix has no object for {{{name}}} in {path}"
            path = path.replace(f"{{{name}}}", own.get(name, self.ids[name]))
        return path


def _path_parameters(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def _build_world(api: Api) -> World:
    access = api.store.access
    owner = access.create_tenant("owner")
    intruder = access.create_tenant("intruder")
    owner_admin = api.as_key(access.create_api_key(owner.id, Role.ADMIN, "k")[1])
    upload = api.http.post(
        "/v1/artifacts",
        headers=owner_admin,
        files={"file": ("secret.py", f"print('{SECRET}')".encode(), "text/x-python")},
    )
    assert upload.status_code == 201, upload.text
    artifact_id = upload.json()["id"]
    body = {"name": f"job-{SECRET}", "runtime": "python", "artifact": artifact_id}
    job = api.http.post("/v1/jobs", headers=owner_admin, json={**body, "env": {"K": SECRET}})
    assert job.status_code == 201, job.text
    job_id = job.json()["id"]
    run = api.http.post(f"/v1/jobs/{job_id}/runs", headers=owner_admin, json={})
    assert run.status_code == 201, run.text
    schedule = api.http.post(
        "/v1/schedules", headers=owner_admin, json={"job_id": job_id, "cron": "@daily"}
    )
    assert schedule.status_code == 201, schedule.text
    worker_id = register_worker(api)
    dispatch(api.store)
    claimed = api.http.post(
        f"/v1/workers/{worker_id}/claim", headers=as_worker(worker_id), json={"wait_seconds": 0}
    )
    assert claimed.status_code == 200, claimed.text
    [assignment] = claimed.json()["assignments"]
    tasks = [{"name": "t", "job": f"job-{SECRET}"}]
    workflow = api.http.post(
        "/v1/workflows", headers=owner_admin, json={"name": f"wf-{SECRET}", "tasks": tasks}
    )
    assert workflow.status_code == 201, workflow.text
    workflow_id = workflow.json()["id"]
    workflow_run = api.http.post(f"/v1/workflows/{workflow_id}/runs", headers=owner_admin)
    assert workflow_run.status_code == 201, workflow_run.text
    now = datetime.now(UTC)
    backfill = api.http.post(
        f"/v1/schedules/{schedule.json()['id']}/backfills",
        headers=owner_admin,
        json={"start": (now - timedelta(days=3)).isoformat(), "end": now.isoformat()},
    )
    assert backfill.status_code == 201, backfill.text
    channel = api.http.post(
        "/v1/alert-channels",
        headers=owner_admin,
        json={"name": "hook", "url": "https://hooks.example.com/herder"},
    )
    assert channel.status_code == 201, channel.text
    rule = api.http.post(
        "/v1/alert-rules",
        headers=owner_admin,
        json={"name": "failed", "kind": "run_failed", "channel_ids": [channel.json()["id"]]},
    )
    assert rule.status_code == 201, rule.text
    secret = api.http.put("/v1/secrets/OWNER_TOKEN", headers=owner_admin, json={"value": SECRET})
    assert secret.status_code == 201, secret.text
    pool = api.http.post(
        "/v1/pools",
        headers=api.admin,
        json={"name": "owners", "shares": [{"tenant_id": owner.id, "gpus": 3}]},
    )
    assert pool.status_code == 201, pool.text
    limit = api.http.post(
        "/v1/limits", headers=owner_admin, json={"name": "partner-api", "max_running": 1}
    )
    assert limit.status_code == 201, limit.text
    trigger = api.http.post(
        "/v1/triggers",
        headers=owner_admin,
        json={"name": "on-push", "event": "push", "job": f"job-{SECRET}"},
    )
    assert trigger.status_code == 201, trigger.text
    event = api.http.post(
        "/v1/events", headers=owner_admin, json={"name": "push", "payload": {"s": SECRET}}
    )
    assert event.status_code == 201, event.text
    hook = api.http.post("/v1/hooks", headers=owner_admin, json={"name": "github"})
    assert hook.status_code == 201, hook.text
    world = World(
        ids={
            "artifact_id": artifact_id,
            "job_id": job_id,
            "run_id": run.json()["id"],
            "schedule_id": schedule.json()["id"],
            "tenant_id": owner.id,
            "worker_id": worker_id,
            "attempt_id": assignment["attempt_id"],
            "workflow_id": workflow_id,
            "workflow_run_id": workflow_run.json()["id"],
            "backfill_id": backfill.json()["id"],
            "channel_id": channel.json()["id"],
            "rule_id": rule.json()["id"],
            "key_id": access.create_api_key(owner.id, Role.DEVELOPER, "to revoke")[0].id,
            "session_id": api.store.users.sign_in(
                Person(issuer="https://idp.example", subject="owner-person", name="owner"),
                owner.id,
                Role.VIEWER,
                kind="cli",
                lifetime=timedelta(hours=1),
            )[0].id,
            "name": "OWNER_TOKEN",
            "pool_id": pool.json()["id"],
            "limit_id": limit.json()["id"],
            "trigger_id": trigger.json()["id"],
            "event_id": event.json()["event"]["id"],
            "hook_id": hook.json()["id"],
            "task": "t",
        }
    )
    system_key = access.create_api_key(api.tenant_id, Role.DEVELOPER, "to revoke")[0].id
    world.own_ids = {
        owner.id: {"tenant_id": owner.id, "key_id": world.ids["key_id"]},
        api.tenant_id: {"tenant_id": api.tenant_id, "key_id": system_key},
    }
    world.intruder = api.as_key(access.create_api_key(intruder.id, Role.ADMIN, "k")[1])
    world.other_worker_token = api.as_key(access.create_worker_token("other fleet"))
    world.other_worker_secret = as_worker(register_worker(api, "other worker"))
    for credential in CREDENTIALS:
        if credential.worker is Needs.FLEET:
            world.headers[credential.name] = api.worker
        elif credential.worker is Needs.WORKER:
            world.headers[credential.name] = as_worker(worker_id)
        elif credential.role is None:
            world.headers[credential.name] = {}
        else:
            tenant = api.tenant_id if credential.system else owner.id
            token = access.create_api_key(tenant, credential.role, credential.name)[1]
            world.headers[credential.name] = api.as_key(token)
    return world


ROUTES = [(method, path, operation) for method, path, operation in operations()]
ID_ROUTES = [route for route in ROUTES if _path_parameters(route[1])]


@pytest.fixture
def world(api: Api) -> World:
    return _build_world(api)


def _call(api: Api, world: World, method: str, path: str, url: str, headers: Any) -> Any:
    body = world.body(method, path)
    json = body if method in {"POST", "PATCH", "PUT"} else None
    return api.http.request(method, url, headers=headers, json=json)


def test_another_tenants_objects_answer_404_and_nothing_of_them(api: Api, world: World) -> None:
    """Also the system tenant's admins: jobs, runs, schedules and artifacts belong to their
    tenant alone (only tenants themselves are the system admins' to read)."""
    wrong = []
    for method, path, operation in ID_ROUTES:
        need = needs(method, path, operation)
        if need in (Needs.SYSTEM_ADMIN, Needs.SIGNATURE) or (method, path) in OWN_NAMESPACE:
            continue  # refused by role (403) or unsigned (401) below; or its own namespace
        if need is Needs.WORKER:
            intruders = {
                "the fleet token": world.headers["worker token"],
                "another fleet token": world.other_worker_token,
                "another worker's secret": world.other_worker_secret,
            }
            refusal = 401  # a worker is no tenant's object: the credential is what is wrong
        else:
            refusal = 404
            intruders = {"another tenant's admin": world.intruder}
            # the system admins administer every tenant and read every pool
            if need is not Needs.TENANT_ADMIN and (method, path) not in SYSTEM_WIDE:
                intruders["a system admin"] = world.headers["system admin"]
        for who, headers in intruders.items():
            response = _call(api, world, method, path, world.url(path), headers)
            if response.status_code != refusal or SECRET in response.text:
                wrong.append(f"{method} {path} as {who}: {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)
    assert len(ID_ROUTES) >= 25
    # and the intruders changed nothing
    owner_job = api.store.jobs.get(world.ids["tenant_id"], world.ids["job_id"])
    assert owner_job.spec.env == {"K": SECRET}
    put = _call(api, world, "PUT", "/v1/secrets/{name}", "/v1/secrets/OWNER_TOKEN", world.intruder)
    assert put.status_code == 201  # the intruder's own secret of that name
    assert api.store.secrets.get(world.ids["tenant_id"], "OWNER_TOKEN").version == 1


def test_every_route_refuses_every_credential_that_may_not_use_it(api: Api, world: World) -> None:
    """Refused first (they must change nothing), then admitted (which may change things:
    an admitted call answers anything but 401 and 403)."""
    wrong = []
    cases = [
        (credential, method, path, needs(method, path, operation))
        for method, path, operation in ROUTES
        for credential in CREDENTIALS
    ]
    refused = [case for case in cases if not case[0].may(case[3])]
    admitted = [case for case in cases if case[0].may(case[3])]
    for credential, method, path, need in refused + admitted:
        own_tenant = api.tenant_id if credential.system else world.ids["tenant_id"]
        url = world.url(path, own_tenant)
        headers = world.headers[credential.name]
        status = _call(api, world, method, path, url, headers).status_code
        expected = "admitted" if credential.may(need) else "refused"
        if credential.may(need):
            ok = status not in (401, 403)
        else:
            # a worker credential of the wrong kind is no credential for a worker route
            unknown = (
                credential.name == "nothing"
                or need is Needs.SIGNATURE
                or (credential.worker is not None and need in (Needs.FLEET, Needs.WORKER))
            )
            ok = status == (401 if unknown else 403)
        if not ok:
            wrong.append(
                f"{method} {path} ({need.value}) as {credential.name}: {status}, "
                f"expected {expected}"
            )
    assert not wrong, "\n".join(wrong)
    assert len(refused) > 100


# The security scheme of each kind of credential in the OpenAPI document (None: no bearer
# credential at all); every other route takes an API key (``bearerAuth``).
SCHEMES = {
    Needs.NOTHING: None,
    Needs.SIGNATURE: None,
    Needs.FLEET: "workerToken",
    Needs.WORKER: "workerSecret",
}


def test_the_document_asks_each_route_for_the_credential_it_admits() -> None:
    """What /docs's Authorize sends for a route is what the matrix above admits there."""
    wrong = []
    for method, path, operation in ROUTES:
        scheme = SCHEMES.get(needs(method, path, operation), "bearerAuth")
        expected: list[dict[str, list[str]]] = [] if scheme is None else [{scheme: []}]
        if operation.get("security", []) != expected:
            wrong.append(f"{method} {path}: {operation.get('security')}, expected {expected}")
    assert not wrong, "\n".join(wrong)


def _takes_overrides(operation: dict[str, Any]) -> str | None:
    """Where a route's body holds a run's raw overrides: ``""`` (the body), ``"runs.0."``
    (each run of a batch), or None."""
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    schemas = [resolve(content.get("schema", {}))]
    schemas += [resolve(option) for option in schemas[0].get("anyOf", [])]
    for schema in schemas:
        properties = schema.get("properties", {})
        if set(RAW_OVERRIDES) <= set(properties):
            return ""
        items = resolve(properties.get("runs", {})).get("items")
        if items and set(RAW_OVERRIDES) <= set(resolve(items).get("properties", {})):
            return "runs.0."
    return None


OVERRIDE_ROUTES = [
    (method, path, where)
    for method, path, operation in ROUTES
    if needs(method, path, operation) is Needs.OPERATOR
    and (where := _takes_overrides(operation)) is not None
]


def test_below_developer_a_run_takes_declared_parameters_never_raw_overrides(
    api: Api, world: World
) -> None:
    """Every route an operator may use to start runs refuses it ``args`` and ``env`` (403
    naming the field), and admits a developer's; raw overrides choose what a job runs."""
    assert {(method, path) for method, path, _ in OVERRIDE_ROUTES} == {
        ("POST", "/v1/jobs/{job_id}/runs"), ("POST", "/v1/runs/batch"),
    }  # fmt: skip
    values = {"args": ["x"], "env": {"VERBOSE": "1"}}
    wrong = []
    for method, path, where in OVERRIDE_ROUTES:
        for credential in CREDENTIALS:
            if credential.system or not credential.may(Needs.OPERATOR):
                continue
            for name in RAW_OVERRIDES:
                override = {name: values[name]}
                body = (
                    {"runs": [{"job_id": world.ids["job_id"], **override}]} if where else override
                )
                url = world.url(path)
                headers = world.headers[credential.name]
                answer = api.http.request(method, url, headers=headers, json=body)
                if credential.may(Needs.DEVELOPER):
                    ok = answer.status_code in (200, 201)
                else:
                    ok = answer.status_code == 403 and answer.json()["field"] == where + name
                if not ok:
                    wrong.append(f"{method} {path} {name} as {credential.name}: {answer.text}")
            plain = {"runs": [{"job_id": world.ids["job_id"], "params": {}}]} if where else {}
            admitted = api.http.request(method, world.url(path), headers=headers, json=plain)
            if admitted.status_code not in (200, 201):
                wrong.append(f"{method} {path} with params as {credential.name}: {admitted.text}")
    assert not wrong, "\n".join(wrong)
