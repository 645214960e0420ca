"""The audit of a tenant's move in the cell it arrives in (docs/cells.md, "Moving a tenant"),
on each store: the system admin's calls are in the system tenant's log, each one — the
programs' bytes sent before the tenant exists here included — with no entry failing and no
error logged; the tenant's own log here begins with its import; an import taken back leaves
nothing of it behind but the system tenant's entries."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.app import moves
from herder.domain.models import Role
from herder.domain.moves import MoveState
from herder.settings import Settings
from herder.store.store import Store
from tests.integration.conftest import Api
from tests.integration.test_tenant_moves import other_cell  # noqa: F401

PROGRAM = b"print('moved')\n"
SHA256 = hashlib.sha256(PROGRAM).hexdigest()


@dataclass
class Exported:
    tenant_id: str
    document: dict[str, Any]


@pytest.fixture
def exported(other_cell: Store, tmp_path: Path) -> Exported:  # noqa: F811
    """A tenant of another cell (SQLite) with a program, frozen and exported there."""
    assert other_cell.access.bootstrap() is not None
    tenant = other_cell.access.create_tenant("mover")
    key = other_cell.access.create_api_key(tenant.id, Role.ADMIN, "k")[1]
    settings = Settings(home=tmp_path / "other", database_url=other_cell.database.url)
    with TestClient(create_app(other_cell, settings)) as source:
        uploaded = source.post(
            "/v1/artifacts",
            headers={"Authorization": f"Bearer {key}"},
            files={"file": ("moved.py", PROGRAM)},
        )
        assert uploaded.status_code == 201, uploaded.text
    moves.shift(other_cell, tenant.id, MoveState.FROZEN, "a")
    document = other_cell.moves.export(tenant.id).model_copy(update={"from_cell": "b"})
    return Exported(tenant.id, document.model_dump(mode="json"))


def _log(api: Api, tenant_id: str) -> list[tuple[str, str, str | None]]:
    """A tenant's audit log here, oldest first: (method, route, object id)."""
    entries = api.store.audit.list(tenant_id).items
    return [(entry.method, entry.route, entry.object_id) for entry in reversed(entries)]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


ARTIFACT_PUT = ("PUT", "/v1/tenants/{tenant_id}/import/artifacts/{artifact_id}")
IMPORT = ("POST", "/v1/tenants/import")
TAKEN_BACK = ("DELETE", "/v1/tenants/{tenant_id}/import")


def test_an_arriving_tenants_programs_and_import_are_audited_with_no_entry_lost(
    api: Api, exported: Exported, caplog: pytest.LogCaptureFixture
) -> None:
    tenant_id = exported.tenant_id
    caplog.set_level(logging.WARNING, logger="herder")
    sent = api.http.put(
        f"/v1/tenants/{tenant_id}/import/artifacts/{SHA256}",
        headers={**api.admin, "Content-Type": "application/octet-stream"},
        content=PROGRAM,
    )
    assert sent.status_code == 204, sent.text
    imported = api.http.post("/v1/tenants/import", headers=api.admin, json=exported.document)
    assert imported.status_code == 201, imported.text
    taken_in = api.http.put(
        f"/v1/tenants/{tenant_id}/move", headers=api.admin, json={"state": None}
    )
    assert taken_in.status_code == 200, taken_in.text

    assert _errors(caplog) == []
    system_log = _log(api, api.tenant_id)
    assert [entry[:2] for entry in system_log] == [
        ARTIFACT_PUT, IMPORT, ("PUT", "/v1/tenants/{tenant_id}/move"),
    ]  # fmt: skip
    assert system_log[0][2] == tenant_id  # the tenant it acted on
    # its own log here begins with its arrival: the bytes came before it was here
    assert [entry[:2] for entry in _log(api, tenant_id)] == [
        IMPORT, ("PUT", "/v1/tenants/{tenant_id}/move"),
    ]  # fmt: skip


def test_an_import_taken_back_is_audited_in_the_system_tenants_log_only(
    api: Api, exported: Exported, caplog: pytest.LogCaptureFixture
) -> None:
    tenant_id = exported.tenant_id
    caplog.set_level(logging.WARNING, logger="herder")
    sent = api.http.put(
        f"/v1/tenants/{tenant_id}/import/artifacts/{SHA256}",
        headers={**api.admin, "Content-Type": "application/octet-stream"},
        content=PROGRAM,
    )
    assert sent.status_code == 204, sent.text
    assert api.http.post("/v1/tenants/import", headers=api.admin, json=exported.document).is_success
    removed = api.http.delete(f"/v1/tenants/{tenant_id}/import", headers=api.admin)
    assert removed.status_code == 204, removed.text
    again = api.http.delete(f"/v1/tenants/{tenant_id}/import", headers=api.admin)
    assert again.status_code == 204, again.text  # nothing to take back: no tenant, no log

    assert _errors(caplog) == []
    assert [entry[:2] for entry in _log(api, api.tenant_id)] == [
        ARTIFACT_PUT, IMPORT, TAKEN_BACK, TAKEN_BACK,
    ]  # fmt: skip
    assert _log(api, tenant_id) == []  # its import's entry went with it


@pytest.mark.parametrize(
    "tenant_id",
    ["ten_" + "x" * 300, "ten_\u00fcber", "..", "ten_01M8H1Z0C3R7Q2W5E9T4Y6V8XP%00", "key_x"],
)
def test_programs_sent_for_no_tenant_id_are_refused_and_fail_no_audit_entry(
    api: Api, tenant_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever a system admin's call names, it is refused as no tenant (404; a NUL: 422
    naming the field), never a 500, and its entry (if its route was matched) is filed, the
    id it named cut to what the log keeps: never a logged failure to record it."""
    caplog.set_level(logging.WARNING, logger="herder")
    sent = api.http.put(
        f"/v1/tenants/{tenant_id}/import/artifacts/{SHA256}",
        headers={**api.admin, "Content-Type": "application/octet-stream"},
        content=PROGRAM,
    )
    assert sent.status_code in (404, 422), sent.text
    assert _errors(caplog) == []
    assert [entry[:2] for entry in _log(api, api.tenant_id)] in ([], [ARTIFACT_PUT])
